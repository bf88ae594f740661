//! Compiles `portal/v1/portal.proto` with protox (pure Rust, no system `protoc`)
//! and generates the prost messages and tonic client and server.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let file = root.join("portal/v1/portal.proto");
    println!("cargo:rerun-if-changed={}", root.join("portal").display());
    let fds = protox::compile([&file], [&root])?;
    tonic_prost_build::configure().bytes(".portal.v1").compile_fds(fds)?;
    Ok(())
}
