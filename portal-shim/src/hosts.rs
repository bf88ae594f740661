//! Which portald each tool call goes to. One [`DaemonLink`] per host,
//! made on first use and kept (one ssh connection per remote host for the
//! shim's life, re-made when it breaks); `--host`/`PORTAL_HOST` names the
//! default (a name, `local`, or an `ssh://` URL the person gave), and a
//! tool's `host` argument names another: `local` or a name from the hosts
//! file, never a URL of the agent's own.
//!
//! The `host` argument is offered only when there is somewhere else to go
//! (the hosts file names a host, or the default is remote): a client with
//! one machine pays no tokens for it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use portal_client::hosts::{ALL, Hosts, LOCAL, Target};
use portal_client::launch::LaunchOptions;
use rmcp::model::Tool;

use crate::link::DaemonLink;

tokio::task_local! {
    /// The remote host the current tool call goes to (`None`: this
    /// machine), for the commands its hints give a person.
    pub(crate) static CALL_HOST: Option<String>;
}

/// [`CALL_HOST`], or `None` outside a call.
pub(crate) fn call_host() -> Option<String> {
    CALL_HOST.try_with(Clone::clone).ok().flatten()
}

/// The name of the argument that picks a host.
pub(crate) const HOST_ARG: &str = "host";

/// Every host's link, made on first use.
pub(crate) struct HostLinks {
    opts: LaunchOptions,
    /// The hosts file, or why it could not be read (said when a host is
    /// named, not at startup: one broken file must not stop local work).
    hosts: Result<Hosts, String>,
    default: Target,
    links: Mutex<BTreeMap<String, Arc<DaemonLink>>>,
}

impl HostLinks {
    /// The links for `opts` (this machine) and the hosts file, with
    /// `default` (`--host`) as the host of calls that name none.
    ///
    /// # Errors
    /// When `default` names no host (a startup flag: said at once).
    pub(crate) fn new(opts: LaunchOptions, default: Option<&str>) -> Result<Self, String> {
        let hosts = Hosts::load().map_err(|e| e.to_string());
        let default = match default.filter(|d| !d.is_empty() && *d != LOCAL) {
            None => Target::Local,
            Some(spec) => {
                hosts.as_ref().map_err(Clone::clone)?.resolve(spec).map_err(|e| e.to_string())?
            }
        };
        Ok(Self { opts, hosts, default, links: Mutex::new(BTreeMap::new()) })
    }

    /// Whether a host other than this machine can be named.
    pub(crate) fn offered(&self) -> bool {
        !self.default.is_local() || self.hosts.as_ref().is_ok_and(|h| h.remotes().next().is_some())
    }

    /// The link to `host` (the default when `None`) and its label.
    ///
    /// # Errors
    /// The text of a tool error naming the host and what exists.
    pub(crate) fn link(&self, host: Option<&str>) -> Result<(Arc<DaemonLink>, Target), String> {
        let target = match host.map(str::trim) {
            None | Some("") => self.default.clone(),
            Some(LOCAL) => Target::Local,
            Some(ALL) => {
                return Err(format!(
                    "Error: host: \"{ALL}\" is only for process_list; name one host."
                ));
            }
            Some(spec) if spec == self.default.label() => self.default.clone(),
            // An agent names hosts the person configured, never a URL of
            // its own: the shim's ssh runs with the user's keys.
            Some(spec) if spec.contains("://") => {
                return Err(format!(
                    "Error: host: {spec:?}: a tool call takes only hosts the hosts file names (or local); ask the person to add it to {}",
                    portal_client::hosts::hosts_file().display()
                ));
            }
            Some(spec) => {
                let hosts = self.hosts.as_ref().map_err(|e| format!("Error: host: {e}"))?;
                hosts.resolve(spec).map_err(|e| format!("Error: host: {e}"))?
            }
        };
        let mut links = self.links.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let link = links
            .entry(target.label().to_owned())
            .or_insert_with(|| Arc::new(DaemonLink::new(target.clone(), self.opts.clone())))
            .clone();
        Ok((link, target))
    }

    /// This machine, the default host and every host of the file, once
    /// each, for `process_list` with `host: "all"`.
    pub(crate) fn every(&self) -> Vec<(Arc<DaemonLink>, Target)> {
        self.names()
            .iter()
            .filter_map(|n| match n.as_str() {
                LOCAL => self.link(Some(LOCAL)).ok(),
                n if n == self.default.label() => self.link(None).ok(),
                n => self.link(Some(n)).ok(),
            })
            .collect()
    }

    /// Splits an id written `HOST:ID` or `HOST:NAME` (as the CLI takes
    /// them) when `HOST` is a host this shim knows.
    pub(crate) fn split_proc(&self, id: &str) -> Option<(String, String)> {
        let (host, rest) = id.split_once(':')?;
        (!rest.is_empty() && self.names().iter().any(|n| n == host))
            .then(|| (host.to_owned(), rest.to_owned()))
    }

    /// The names a `host` argument takes, for its description.
    fn names(&self) -> Vec<String> {
        let mut names = vec![LOCAL.to_owned()];
        if !self.default.is_local() {
            names.push(self.default.label().to_owned());
        }
        if let Ok(h) = &self.hosts {
            for r in h.remotes() {
                if !names.contains(&r.label) {
                    names.push(r.label.clone());
                }
            }
        }
        names
    }

    /// Adds the `host` argument to `tool`'s input schema; `listing` adds
    /// `"all"` (`process_list`).
    pub(crate) fn add_host_arg(&self, tool: &mut Tool, listing: bool) {
        let default = self.default.label();
        let mut description = format!(
            "Host: {} (default {default}). Ids and names are per host.",
            self.names().join(", ")
        );
        if listing {
            description.push_str(" \"all\": every host, each entry with its host.");
        }
        let mut schema = (*tool.input_schema).clone();
        let properties = schema
            .entry("properties")
            .or_insert_with(|| serde_json::Value::Object(serde_json::Map::new()));
        if let Some(p) = properties.as_object_mut() {
            p.insert(
                HOST_ARG.to_owned(),
                serde_json::json!({"type": "string", "description": description}),
            );
        }
        tool.input_schema = Arc::new(schema);
    }
}
