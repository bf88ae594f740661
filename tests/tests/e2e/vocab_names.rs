//! The shared vocabulary is the only place its names are spelled: a
//! state, status, reason or source written as a string literal anywhere
//! else could drift from the daemon's, the shim's and the CLI's.

use std::collections::BTreeSet;
use std::path::Path;

use crate::tidy::{rust_files, string_end, string_prefix};

/// Every name of the shared vocabulary (`portal_client::vocab`) that is
/// unmistakably one (it has an underscore: `awaiting_input`, `timed_out`;
/// a plain word such as `done` has other meanings).
fn vocabulary_names() -> BTreeSet<&'static str> {
    use portal_client::vocab::*;
    let mut all: Vec<&'static str> = Vec::new();
    all.extend(Status::ALL.iter().map(|v| v.as_str()));
    all.extend(WaitReason::ALL.iter().map(|v| v.as_str()));
    all.extend(InputState::ALL.iter().map(|v| v.as_str()));
    all.extend(InputSource::ALL.iter().map(|v| v.as_str()));
    all.extend(AgentState::ALL.iter().map(|v| v.as_str()));
    all.extend(AgentSource::ALL.iter().map(|v| v.as_str()));
    all.extend(AgentWaitOutcome::ALL.iter().map(|v| v.as_str()));
    all.extend(HookStatus::ALL.iter().map(|v| v.as_str()));
    all.extend(HookTrust::ALL.iter().map(|v| v.as_str()));
    all.extend(Stream::ALL.iter().map(|v| v.as_str()));
    all.into_iter().filter(|n| n.contains('_')).collect()
}

/// The plain string literals of `text`'s code before its unit tests, each
/// with the first character after it that is not a space.
fn string_literals(text: &str) -> Vec<(String, Option<char>)> {
    let code = text.split("\n#[cfg(test)]\nmod tests").next().unwrap_or(text);
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let (c, next) = (chars[i], chars.get(i + 1).copied());
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '\'' && (next == Some('\\') || chars.get(i + 2) == Some(&'\'')) {
            // A character literal ('"' among them).
            i += if next == Some('\\') { 3 } else { 2 };
            while i < chars.len() && chars[i] != '\'' {
                i += 1;
            }
            i += 1;
        } else if c == '"' || string_prefix(&chars, i).is_some() {
            let end = string_end(&chars, i);
            if c == '"' {
                let body: String = chars[i + 1..end.saturating_sub(1)].iter().collect();
                let after = chars[end..].iter().copied().find(|c| !c.is_whitespace());
                out.push((body, after));
            }
            i = end;
        } else if c.is_alphanumeric() || c == '_' {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    out
}

/// A state, status, reason or source is named once, in the vocabulary:
/// everyone else says `AgentState::AwaitingInput`, never
/// `"awaiting_input"`, so a name cannot drift between the daemon, the shim
/// and the CLI (a key of a JSON object, `"awaiting_secret": …`, is a field
/// name, not a value, and is let be).
#[test]
fn each_vocabulary_name_is_spelled_only_in_the_vocabulary() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let names = vocabulary_names();
    assert!(names.contains("awaiting_input") && names.contains("holder_lost"), "{names:?}");
    let mut files = Vec::new();
    for dir in
        ["proto/src", "portal-client/src", "portald/src", "portal-shim/src", "portal-cli/src"]
    {
        rust_files(&root.join(dir), &mut files);
    }
    let mut found = Vec::new();
    for file in files {
        let rel = file.strip_prefix(root).unwrap().to_string_lossy().into_owned();
        if rel == "portal-client/src/vocab.rs" {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for (body, after) in string_literals(&text) {
            if names.contains(body.as_str()) && after != Some(':') {
                found.push(format!("{rel}: \"{body}\""));
            }
        }
    }
    assert!(
        found.is_empty(),
        "names spelled outside portal_client::vocab (use the enum):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_name_finder_sees_values_not_keys_comments_or_tests() {
    let text = "let a = \"awaiting_input\";\n// \"timed_out\"\njson!({\"awaiting_secret\": 1});\nlet c = '\"';\nlet r = r#\"holder_lost\"#;\n#[cfg(test)]\nmod tests { \"not_detected\" }\n";
    let lits = string_literals(text);
    let values: Vec<&str> =
        lits.iter().filter(|(_, after)| *after != Some(':')).map(|(b, _)| b.as_str()).collect();
    assert_eq!(values, ["awaiting_input"]);
}
