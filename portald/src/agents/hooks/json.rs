//! A JSON parser that keeps the byte span of every value, member and
//! element, and the small text edits built on those spans: Claude Code's
//! settings are edited in place, so everything outside Portal's entries
//! stays as the user wrote it.

/// A value with its span.
#[derive(Debug)]
pub(crate) struct Node {
    /// First byte.
    pub(crate) start: usize,
    /// One past the last byte.
    pub(crate) end: usize,
    /// The value.
    pub(crate) value: Value,
}

/// An object member: `start` is where its key begins.
#[derive(Debug)]
pub(crate) struct Member {
    /// Where the key's quote is.
    pub(crate) start: usize,
    /// The key.
    pub(crate) key: String,
    /// The value.
    pub(crate) value: Node,
}

/// JSON values (numbers and literals are not needed as such).
#[derive(Debug)]
pub(crate) enum Value {
    /// An object.
    Object(Vec<Member>),
    /// An array.
    Array(Vec<Node>),
    /// A string.
    String(String),
    /// Anything else.
    Scalar,
}

struct P<'a> {
    s: &'a [u8],
    i: usize,
    depth: usize,
}

/// Parses a whole document.
pub(crate) fn parse(text: &str) -> Result<Node, String> {
    let mut p = P { s: text.as_bytes(), i: 0, depth: 0 };
    let node = p.value()?;
    p.ws();
    if p.i != p.s.len() {
        return Err(format!("unexpected text at byte {}", p.i));
    }
    Ok(node)
}

/// Nesting limit, far above any settings file.
const MAX_DEPTH: usize = 128;

impl P<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn err<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("{what} at byte {}", self.i))
    }

    fn value(&mut self) -> Result<Node, String> {
        self.ws();
        let start = self.i;
        let value = match self.s.get(self.i) {
            Some(b'{') => {
                self.depth += 1;
                if self.depth > MAX_DEPTH {
                    return self.err("nested too deeply");
                }
                self.i += 1;
                let mut members = Vec::new();
                self.ws();
                if self.s.get(self.i) == Some(&b'}') {
                    self.i += 1;
                } else {
                    loop {
                        self.ws();
                        let kstart = self.i;
                        let Value::String(key) = self.string()? else {
                            return self.err("expected a key");
                        };
                        self.ws();
                        if self.s.get(self.i) != Some(&b':') {
                            return self.err("expected ':'");
                        }
                        self.i += 1;
                        let value = self.value()?;
                        members.push(Member { start: kstart, key, value });
                        self.ws();
                        match self.s.get(self.i) {
                            Some(b',') => self.i += 1,
                            Some(b'}') => {
                                self.i += 1;
                                break;
                            }
                            _ => return self.err("expected ',' or '}'"),
                        }
                    }
                }
                self.depth -= 1;
                Value::Object(members)
            }
            Some(b'[') => {
                self.depth += 1;
                if self.depth > MAX_DEPTH {
                    return self.err("nested too deeply");
                }
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if self.s.get(self.i) == Some(&b']') {
                    self.i += 1;
                } else {
                    loop {
                        items.push(self.value()?);
                        self.ws();
                        match self.s.get(self.i) {
                            Some(b',') => self.i += 1,
                            Some(b']') => {
                                self.i += 1;
                                break;
                            }
                            _ => return self.err("expected ',' or ']'"),
                        }
                    }
                }
                self.depth -= 1;
                Value::Array(items)
            }
            Some(b'"') => self.string()?,
            Some(c) if c.is_ascii_digit() || *c == b'-' => {
                while self.i < self.s.len()
                    && matches!(self.s[self.i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
                {
                    self.i += 1;
                }
                Value::Scalar
            }
            Some(_) => {
                for lit in [&b"true"[..], b"false", b"null"] {
                    if self.s[self.i..].starts_with(lit) {
                        self.i += lit.len();
                        return Ok(Node { start, end: self.i, value: Value::Scalar });
                    }
                }
                return self.err("unexpected character");
            }
            None => return self.err("unexpected end"),
        };
        Ok(Node { start, end: self.i, value })
    }

    fn string(&mut self) -> Result<Value, String> {
        if self.s.get(self.i) != Some(&b'"') {
            return self.err("expected a string");
        }
        let start = self.i;
        self.i += 1;
        while self.i < self.s.len() {
            match self.s[self.i] {
                b'\\' => self.i += 2,
                b'"' => {
                    self.i += 1;
                    let raw =
                        std::str::from_utf8(&self.s[start..self.i]).map_err(|e| e.to_string())?;
                    return serde_json::from_str::<String>(raw)
                        .map(Value::String)
                        .map_err(|e| format!("{e} at byte {start}"));
                }
                _ => self.i += 1,
            }
        }
        self.err("unterminated string")
    }
}

/// The file's indentation unit (two spaces when it has none).
pub(crate) fn indent_unit(text: &str) -> String {
    text.lines()
        .find_map(|l| {
            let ws: String = l.chars().take_while(|c| *c == ' ' || *c == '\t').collect();
            (!ws.is_empty() && ws.len() < l.len()).then_some(ws)
        })
        .unwrap_or_else(|| "  ".to_owned())
}

/// Pretty JSON whose nested lines are indented for `depth`.
pub(crate) fn pretty(v: &serde_json::Value, unit: &str, depth: usize) -> String {
    let text = serde_json::to_string_pretty(v).unwrap_or_default();
    let prefix = unit.repeat(depth);
    text.lines()
        .enumerate()
        .map(|(i, l)| {
            let spaces = l.len() - l.trim_start().len();
            let body = format!("{}{}", unit.repeat(spaces / 2), l.trim_start());
            if i == 0 { body } else { format!("{prefix}{body}") }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Inserting `entries` (rendered members or elements) after the last
/// entry of container `node` (an object or array) at `depth`.
pub(crate) fn insert_entries(
    text: &str,
    node: &Node,
    entries: &[String],
    unit: &str,
    depth: usize,
) -> (usize, String) {
    let indent = unit.repeat(depth);
    let last_end = match &node.value {
        Value::Object(members) => members.last().map(|m| m.value.end),
        Value::Array(items) => items.last().map(|n| n.end),
        _ => return (node.end, String::new()),
    };
    match last_end {
        Some(end) => (end, entries.iter().map(|e| format!(",\n{indent}{e}")).collect()),
        None => {
            // `{}` or `[]`, possibly with whitespace: the entries go on
            // their own lines after the opening bracket.
            let between = &text[node.start + 1..node.end - 1];
            let tail = if between.contains('\n') {
                String::new()
            } else {
                format!("\n{}", unit.repeat(depth.saturating_sub(1)))
            };
            let body =
                entries.iter().map(|e| format!("{indent}{e}")).collect::<Vec<_>>().join(",\n");
            (node.start + 1, format!("\n{body}{tail}"))
        }
    }
}

/// Text ranges that remove the entries at `removed` (indices into the
/// entries with spans `spans`) with their separators: a run of removed
/// entries after a kept one goes from the kept entry's end (taking the
/// commas before them); a run at the start goes up to the next kept
/// entry's start; a container losing everything keeps only its brackets'
/// surrounding whitespace. Appended entries thus come out exactly as
/// they went in.
pub(crate) fn removal_ranges(spans: &[(usize, usize)], removed: &[usize]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < spans.len() {
        if !removed.contains(&i) {
            i += 1;
            continue;
        }
        let a = i;
        while i + 1 < spans.len() && removed.contains(&(i + 1)) {
            i += 1;
        }
        let b = i;
        if a > 0 {
            out.push((spans[a - 1].1, spans[b].1));
        } else if let Some(next) = spans.get(b + 1) {
            out.push((spans[a].0, next.0));
        } else {
            out.push((spans[a].0, spans[b].1));
        }
        i += 1;
    }
    out
}
