//! `portal-shim`: the MCP server agents launch over stdio (in progress; the
//! daemon and its API come first).

fn main() {}
