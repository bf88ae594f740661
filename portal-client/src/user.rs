//! Who a process runs as: the identity every Portal connection is checked
//! against, on each platform.
//!
//! On Unix a user is a uid; on Windows it is the security identifier (SID)
//! in a process's access token. [`UserId`] is `Copy` and compares by value on
//! both, so the daemon's and the client's checks read the same everywhere:
//! `peer.uid == Some(user::current())`.

#[cfg(unix)]
pub use unix::{UserId, current, name};
#[cfg(windows)]
pub use windows::{UserId, current, name, of_process};

#[cfg(unix)]
mod unix {
    /// A user, as the kernel names it.
    pub type UserId = u32;

    /// The effective user id of this process.
    #[must_use]
    #[allow(unsafe_code, reason = "getuid has no safe wrapper in std")]
    pub fn current() -> UserId {
        // SAFETY: getuid takes no arguments, cannot fail and touches no memory.
        unsafe { libc::getuid() }
    }

    /// Most bytes of the password-database buffer asked for: a record is a
    /// few hundred bytes; the bound stops a broken NSS module from growing it
    /// forever.
    const MAX_PASSWD_BUFFER_BYTES: usize = 1 << 20;

    /// This process's user name from the password database (`getpwuid_r`, so
    /// NSS sources such as LDAP count); `None` when the uid has no entry.
    #[must_use]
    #[allow(unsafe_code, reason = "getpwuid_r has no safe wrapper in std")]
    pub fn name() -> Option<String> {
        let mut buf = vec![0u8; 1024];
        loop {
            // SAFETY: `passwd` is plain data (pointers and integers) for which
            // all-zero bytes are a valid value; getpwuid_r fills it.
            let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
            let mut found: *mut libc::passwd = std::ptr::null_mut();
            // SAFETY: every pointer is to a live local of the right type, and
            // `buf.len()` is the buffer's true length; the strings written
            // into `pwd` point into `buf`, which outlives their use below.
            let rc = unsafe {
                libc::getpwuid_r(
                    current(),
                    &raw mut pwd,
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    &raw mut found,
                )
            };
            if rc == libc::ERANGE && buf.len() < MAX_PASSWD_BUFFER_BYTES {
                buf.resize(buf.len() * 2, 0);
                continue;
            }
            if rc != 0 || found.is_null() || pwd.pw_name.is_null() {
                return None;
            }
            // SAFETY: on success `pw_name` is a NUL-terminated string inside
            // `buf`, which is still alive.
            let name = unsafe { std::ffi::CStr::from_ptr(pwd.pw_name) };
            return name.to_str().ok().filter(|n| !n.is_empty()).map(str::to_owned);
        }
    }
}

#[cfg(windows)]
mod windows {
    use std::fmt;

    use windows_sys::Win32::Foundation::{CloseHandle, HANDLE};
    use windows_sys::Win32::Security::{
        GetLengthSid, GetTokenInformation, TOKEN_QUERY, TOKEN_USER, TokenUser,
    };
    use windows_sys::Win32::System::Threading::{
        GetCurrentProcess, OpenProcess, OpenProcessToken, PROCESS_QUERY_LIMITED_INFORMATION,
    };

    /// `SECURITY_MAX_SID_SIZE`: a SID with the most sub-authorities (15).
    const MAX_SID_BYTES: usize = 68;

    /// A user: the binary SID of a process's token user, kept inline so
    /// that a connection's peer stays `Copy`.
    #[derive(Clone, Copy, PartialEq, Eq, Hash)]
    pub struct UserId {
        len: u8,
        bytes: [u8; MAX_SID_BYTES],
    }

    impl UserId {
        /// The SID's bytes.
        #[must_use]
        pub fn as_bytes(&self) -> &[u8] {
            &self.bytes[..usize::from(self.len)]
        }
    }

    /// The SID in its usual text form, `S-1-5-21-…` (revision, 48-bit
    /// identifier authority, then each 32-bit sub-authority).
    impl fmt::Display for UserId {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            let b = self.as_bytes();
            let (Some(&revision), Some(authority)) = (b.first(), b.get(2..8)) else {
                return f.write_str("S-?");
            };
            let authority = authority.iter().fold(0u64, |acc, &x| acc << 8 | u64::from(x));
            write!(f, "S-{revision}-{authority}")?;
            for sub in b.get(8..).unwrap_or_default().chunks_exact(4) {
                let sub = u32::from_le_bytes([sub[0], sub[1], sub[2], sub[3]]);
                write!(f, "-{sub}")?;
            }
            Ok(())
        }
    }

    impl fmt::Debug for UserId {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            fmt::Display::fmt(self, f)
        }
    }

    /// The user this process runs as. A process can always read its own
    /// token; if Windows ever refused, nobody would be admitted (the zero
    /// SID matches no peer), which fails closed.
    #[must_use]
    pub fn current() -> UserId {
        // SAFETY: GetCurrentProcess returns a pseudo-handle that needs no
        // closing and is valid for the whole life of the process.
        #[allow(unsafe_code, reason = "Win32 call without a safe wrapper")]
        let me = unsafe { GetCurrentProcess() };
        token_user(me).unwrap_or(UserId { len: 0, bytes: [0; MAX_SID_BYTES] })
    }

    /// The user process `pid` runs as; `None` when it cannot be read (the
    /// process is gone, or runs as someone whose processes this user may not
    /// open, which is not this user).
    #[must_use]
    pub fn of_process(pid: u32) -> Option<UserId> {
        // SAFETY: OpenProcess takes plain values; the handle it returns is
        // closed below.
        #[allow(unsafe_code, reason = "Win32 call without a safe wrapper")]
        let process = unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid) };
        if process.is_null() {
            return None;
        }
        let user = token_user(process);
        // SAFETY: `process` is a handle this function opened and owns.
        #[allow(unsafe_code, reason = "Win32 call without a safe wrapper")]
        unsafe {
            CloseHandle(process);
        }
        user
    }

    /// The token user of `process`.
    #[allow(unsafe_code, reason = "Win32 calls without a safe wrapper")]
    fn token_user(process: HANDLE) -> Option<UserId> {
        let mut token: HANDLE = std::ptr::null_mut();
        // SAFETY: `process` is a valid handle for the whole call and `token`
        // a live local the call writes a handle into.
        if unsafe { OpenProcessToken(process, TOKEN_QUERY, &raw mut token) } == 0 {
            return None;
        }
        // TOKEN_USER plus the SID it points to: 8-byte aligned, room for the
        // largest SID.
        let mut buf = [0u64; 16];
        let mut len = 0u32;
        // SAFETY: `buf` is writable for the length given (128 bytes) and
        // aligned for TOKEN_USER; `len` is a live local.
        let ok = unsafe {
            GetTokenInformation(
                token,
                TokenUser,
                buf.as_mut_ptr().cast(),
                u32::try_from(std::mem::size_of_val(&buf)).unwrap_or(u32::MAX),
                &raw mut len,
            )
        };
        // SAFETY: `token` was opened above and is owned here.
        unsafe {
            CloseHandle(token);
        }
        if ok == 0 {
            return None;
        }
        // SAFETY: on success the buffer starts with a TOKEN_USER whose SID
        // pointer points into the same buffer, which is still alive.
        let sid = unsafe { (*buf.as_ptr().cast::<TOKEN_USER>()).User.Sid };
        // SAFETY: `sid` is a valid SID (see above).
        let n = usize::try_from(unsafe { GetLengthSid(sid) }).ok()?;
        if n == 0 || n > MAX_SID_BYTES {
            return None;
        }
        let mut bytes = [0u8; MAX_SID_BYTES];
        // SAFETY: `sid` points to `n` readable bytes, checked to fit.
        bytes[..n].copy_from_slice(unsafe { std::slice::from_raw_parts(sid.cast::<u8>(), n) });
        Some(UserId { len: u8::try_from(n).ok()?, bytes })
    }

    /// This process's user name (`USERNAME`, as Windows sets it at logon).
    #[must_use]
    pub fn name() -> Option<String> {
        std::env::var("USERNAME").ok().filter(|n| !n.is_empty())
    }
}
