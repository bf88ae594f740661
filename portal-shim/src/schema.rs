//! Tool schemas as every MCP client takes them, at the smallest size.
//!
//! The schemas come from the argument and result types (schemars); this
//! rewrites them into plain JSON Schema 2020-12 that every SDK validates
//! without a warning, and that costs a model few tokens on every turn:
//! - no `format` (schemars writes `uint64`, `int32`…, which the TypeScript
//!   SDK's validator does not know and warns about at every call); integer
//!   bounds stay as `minimum`;
//! - no `null` in types (MCP Inspector's strict mode warns on
//!   `["integer", "null"]`): an optional argument is simply not required, and
//!   an absent result field is left out of the result (see
//!   [`without_nulls`]) rather than sent as `null`;
//! - one-value alternatives (`oneOf` of `const`s, how enums come out) become
//!   an `enum`;
//! - no `$schema`, titles, `default: null`, or prose on the schema itself;
//!   argument descriptions stay (that is how a model learns an argument),
//!   on one line; defaults that go without saying (`false`, `0`, `[]`),
//!   `minimum: 0` and `additionalProperties: false` go (the shim refuses a
//!   negative number or an unknown argument by name anyway);
//! - definitions are written where they are used (each is used once or
//!   twice, and a `$ref` with its `$defs` entry costs more than the copy);
//!   the argument's own description wins over the definition's;
//! - result schemas give the top level of the result: each field and its
//!   type, nested objects as `object` (results are self-describing JSON, and
//!   the tool's description names the fields that matter). Every client
//!   that validates results does it on every call, so a shallow schema is
//!   also a fast one.

use serde_json::{Map, Value};

/// Which side of a tool a schema is for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    /// Arguments: descriptions kept.
    Input,
    /// Results: shape only.
    Output,
}

/// Rewrites a generated schema (see the module doc).
pub(crate) fn portable(mut schema: Map<String, Value>, side: Side) -> Map<String, Value> {
    schema.remove("$schema");
    schema.remove("title");
    schema.remove("description");
    if side == Side::Input {
        schema.remove("additionalProperties");
    }
    let mut root = Value::Object(schema);
    rewrite(&mut root, side);
    if side == Side::Input {
        root = inlined(root);
    }
    if side == Side::Output {
        root = top_level(root);
    }
    match root {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn rewrite(v: &mut Value, side: Side) {
    match v {
        Value::Object(map) => {
            map.remove("format");
            map.remove("title");
            if map.get("default").is_some_and(Value::is_null) {
                map.remove("default");
            }
            match side {
                Side::Output => {
                    // Shape only: what is there and of which type.
                    for k in ["description", "default", "required", "minimum", "maximum"] {
                        map.remove(k);
                    }
                    if map.get("additionalProperties").is_some_and(|a| a == false) {
                        map.remove("additionalProperties");
                    }
                }
                Side::Input => {
                    if let Some(Value::String(d)) = map.get_mut("description") {
                        *d = one_line(d);
                    }
                    if map.get("minimum").is_some_and(|m| m == 0) {
                        map.remove("minimum");
                    }
                    if map.get("default").is_some_and(goes_without_saying) {
                        map.remove("default");
                    }
                }
            }
            drop_null_type(map);
            consts_to_enum(map);
            optional_when_nullable(map);
            for (_, child) in map.iter_mut() {
                rewrite(child, side);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| rewrite(i, side)),
        _ => {}
    }
}

/// The schema with every `$ref` replaced by its definition.
fn inlined(root: Value) -> Value {
    let Value::Object(mut root) = root else { return root };
    let Some(defs) = root.remove("$defs") else { return Value::Object(root) };
    let mut root = Value::Object(root);
    substitute(&mut root, &defs);
    root
}

fn substitute(v: &mut Value, defs: &Value) {
    match v {
        Value::Object(map) => {
            let def = map
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix("#/$defs/"))
                .and_then(|name| defs.get(name))
                .and_then(Value::as_object);
            if let Some(def) = def {
                map.remove("$ref");
                for (k, x) in def {
                    map.entry(k.clone()).or_insert_with(|| x.clone());
                }
            }
            for (_, child) in map.iter_mut() {
                substitute(child, defs);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| substitute(i, defs)),
        _ => {}
    }
}

/// A default a model would assume anyway.
fn goes_without_saying(v: &Value) -> bool {
    match v {
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Array(a) => a.is_empty(),
        Value::String(s) => s.is_empty(),
        _ => false,
    }
}

/// A result schema cut to its top level: each field with its type; nested
/// objects are `object`, arrays of objects `array` of `object`.
fn top_level(root: Value) -> Value {
    let Value::Object(mut root) = root else { return root };
    let defs = root.remove("$defs");
    if let Some(Value::Object(props)) = root.get_mut("properties") {
        for (_, p) in props.iter_mut() {
            *p = shallow(p, defs.as_ref());
        }
    }
    Value::Object(root)
}

/// One field's schema, without what lies below it.
fn shallow(field: &Value, defs: Option<&Value>) -> Value {
    let resolved = match field.get("$ref").and_then(Value::as_str) {
        Some(r) => r.strip_prefix("#/$defs/").and_then(|name| defs?.get(name)).unwrap_or(field),
        None => field,
    };
    let Some(map) = resolved.as_object() else { return resolved.clone() };
    let mut out = Map::new();
    if let Some(t) = map.get("type") {
        out.insert("type".into(), t.clone());
    } else if map.contains_key("properties") {
        out.insert("type".into(), "object".into());
    }
    if let Some(e) = map.get("enum") {
        out.insert("enum".into(), e.clone());
    }
    if let Some(items) = map.get("items") {
        let inner = shallow(items, defs);
        let scalar = inner.get("type").is_some_and(|t| t != "object" && t != "array");
        let item = if scalar { inner } else { serde_json::json!({"type": "object"}) };
        out.insert("items".into(), item);
    }
    if out.get("type").is_some_and(|t| t == "object")
        && let Some(ap) = map.get("additionalProperties").filter(|a| a.is_object())
    {
        out.insert("additionalProperties".into(), shallow(ap, defs));
    }
    Value::Object(out)
}

/// Doc comments come with their line breaks; a schema wants one line.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whether a property schema admits `null` (`type: [T, "null"]`, or an
/// `anyOf` with a `{"type": "null"}` branch).
fn nullable(schema: &Value) -> bool {
    let Some(map) = schema.as_object() else { return false };
    let null_type =
        map.get("type").and_then(Value::as_array).is_some_and(|t| t.iter().any(|x| x == "null"));
    let null_branch = map
        .get("anyOf")
        .and_then(Value::as_array)
        .is_some_and(|b| b.iter().any(|x| x.get("type").is_some_and(|t| t == "null")));
    null_type || null_branch
}

/// `["integer", "null"]` → `"integer"`; an `anyOf` of one schema and
/// `null` → that schema.
fn drop_null_type(map: &mut Map<String, Value>) {
    if let Some(Value::Array(types)) = map.get_mut("type") {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let only = types.remove(0);
            map.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(branches)) = map.get_mut("anyOf") {
        branches.retain(|b| b.get("type").is_none_or(|t| t != "null"));
        if branches.len() == 1 {
            let only = branches.remove(0);
            map.remove("anyOf");
            if let Value::Object(inner) = only {
                for (k, v) in inner {
                    map.entry(k).or_insert(v);
                }
            }
        }
    }
}

/// `oneOf: [{const: "a", description: …}, …]` → `enum: ["a", …]`, the
/// alternatives' descriptions joined into the schema's own.
fn consts_to_enum(map: &mut Map<String, Value>) {
    let Some(Value::Array(branches)) = map.get("oneOf") else { return };
    if !branches.iter().all(|b| b.get("const").is_some()) {
        return;
    }
    let values: Vec<Value> = branches.iter().filter_map(|b| b.get("const").cloned()).collect();
    let notes: Vec<String> = branches
        .iter()
        .filter_map(|b| {
            let c = b.get("const")?.as_str()?;
            let d = b.get("description")?.as_str()?;
            Some(format!("{c}: {}", one_line(d).trim_end_matches('.')))
        })
        .collect();
    map.remove("oneOf");
    map.insert("type".into(), Value::String("string".into()));
    map.insert("enum".into(), Value::Array(values));
    if !notes.is_empty() && map.contains_key("description") {
        let own = map.get("description").and_then(Value::as_str).unwrap_or_default();
        let joined = format!("{} ({}).", one_line(own).trim_end_matches('.'), notes.join("; "));
        map.insert("description".into(), Value::String(joined));
    }
}

/// A nullable property is optional: it leaves `required`, and loses `null`.
fn optional_when_nullable(map: &mut Map<String, Value>) {
    let Some(Value::Object(props)) = map.get("properties") else { return };
    let nullable: Vec<String> =
        props.iter().filter(|(_, s)| nullable(s)).map(|(k, _)| k.clone()).collect();
    if let Some(Value::Array(required)) = map.get_mut("required") {
        required.retain(|r| r.as_str().is_none_or(|r| !nullable.iter().any(|n| n == r)));
        if required.is_empty() {
            map.remove("required");
        }
    }
}

/// A result without its `null` fields, which the result schemas leave out
/// (see the module doc).
pub(crate) fn without_nulls(v: Value) -> Value {
    match v {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(_, x)| !x.is_null())
                .map(|(k, x)| (k, without_nulls(x)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(without_nulls).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn formats_nulls_and_prose_go_shapes_stay() {
        let generated = obj(json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "Args", "description": "Arguments of `x`.", "type": "object",
            "properties": {
                "id": {"description": "Process\nid.", "type": "integer", "format": "uint64", "minimum": 0},
                "limit": {"default": null, "type": ["integer", "null"], "format": "uint32"},
                "mode": {"$ref": "#/$defs/Mode"},
                "when": {"anyOf": [{"$ref": "#/$defs/Mode"}, {"type": "null"}]}
            },
            "required": ["id", "limit", "when"],
            "$defs": {"Mode": {"description": "How.", "oneOf": [
                {"const": "pty", "description": "A terminal.", "type": "string"},
                {"const": "pipes", "description": "Pipes.", "type": "string"}]}}
        }));
        let input = Value::Object(portable(generated.clone(), Side::Input));
        assert_eq!(
            input,
            json!({
                "type": "object",
                "properties": {
                    "id": {"description": "Process id.", "type": "integer"},
                    "limit": {"type": "integer"},
                    "mode": {"description": "How (pty: A terminal; pipes: Pipes).",
                        "type": "string", "enum": ["pty", "pipes"]},
                    "when": {"description": "How (pty: A terminal; pipes: Pipes).",
                        "type": "string", "enum": ["pty", "pipes"]}
                },
                "required": ["id"]
            })
        );
        let output = Value::Object(portable(generated, Side::Output)).to_string();
        for gone in ["description", "required", "minimum"] {
            assert!(!output.contains(gone), "{output}");
        }
    }

    #[test]
    fn results_leave_out_nulls() {
        let v = json!({"a": null, "b": [{"c": null, "d": 1}], "e": "x"});
        assert_eq!(without_nulls(v), json!({"b": [{"d": 1}], "e": "x"}));
    }
}
