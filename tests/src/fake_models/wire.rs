//! A scripted reply in each API's wire format: Anthropic Messages (a
//! message or its SSE events) and OpenAI Responses (SSE events), split into
//! what is sent at once and what waits for a held reply's release.

use serde_json::{Value, json};

use super::Reply;

fn event(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// The reply under any [`Reply::Held`] wrappers.
fn inner(reply: &Reply) -> &Reply {
    match reply {
        Reply::Held(r) => inner(r),
        r => r,
    }
}

/// Splits a text into a few deltas, as a model streams it.
fn deltas(text: &str) -> Vec<String> {
    let words: Vec<&str> = text.split_inclusive(' ').collect();
    words.chunks(3).map(|c| c.concat()).collect()
}

fn usage_anthropic() -> Value {
    json!({"input_tokens": 100, "output_tokens": 10, "cache_creation_input_tokens": 0,
           "cache_read_input_tokens": 0})
}

/// The content block of an Anthropic reply, and its stop reason.
fn anthropic_block(reply: &Reply, id: u64) -> (Value, &'static str) {
    match inner(reply) {
        Reply::Shell(cmd) => (
            json!({"type": "tool_use", "id": format!("toolu_fake{id}"), "name": "Bash",
                   "input": {"command": cmd, "description": format!("Run {cmd}")}}),
            "tool_use",
        ),
        Reply::Text(t) => (json!({"type": "text", "text": t}), "end_turn"),
        Reply::Held(_) => (json!({"type": "text", "text": ""}), "end_turn"),
    }
}

fn model_of(body: &Value) -> Value {
    body.get("model").cloned().unwrap_or_else(|| json!("fake-model"))
}

pub(super) fn anthropic_message(reply: &Reply, body: &Value, id: u64) -> String {
    let (block, stop) = anthropic_block(reply, id);
    json!({"id": format!("msg_fake{id}"), "type": "message", "role": "assistant",
           "model": model_of(body), "content": [block], "stop_reason": stop,
           "stop_sequence": null, "usage": usage_anthropic()})
    .to_string()
}

/// The SSE of an Anthropic streaming reply: (sent at once, sent after a release).
pub(super) fn anthropic_sse(reply: &Reply, body: &Value, id: u64) -> (String, String) {
    let start = event(
        "message_start",
        &json!({"type": "message_start", "message": {"id": format!("msg_fake{id}"),
            "type": "message", "role": "assistant", "model": model_of(body), "content": [],
            "stop_reason": null, "stop_sequence": null, "usage": usage_anthropic()}}),
    );
    let (block, stop) = anthropic_block(reply, id);
    let mut rest = String::new();
    let mut opened = block.clone();
    let pieces: Vec<Value> = if block["type"] == "tool_use" {
        opened["input"] = json!({});
        let input = block["input"].to_string();
        vec![json!({"type": "input_json_delta", "partial_json": input})]
    } else {
        opened["text"] = json!("");
        let text = block["text"].as_str().unwrap_or_default();
        deltas(text).into_iter().map(|d| json!({"type": "text_delta", "text": d})).collect()
    };
    rest += &event(
        "content_block_start",
        &json!({"type": "content_block_start", "index": 0, "content_block": opened}),
    );
    for delta in pieces {
        rest += &event(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        );
    }
    rest += &event("content_block_stop", &json!({"type": "content_block_stop", "index": 0}));
    rest += &event(
        "message_delta",
        &json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
                "usage": {"output_tokens": 10}}),
    );
    rest += &event("message_stop", &json!({"type": "message_stop"}));
    (start, rest)
}

/// The output item of a Responses reply for the offered shell `tool`.
fn openai_item(reply: &Reply, tool: &str, id: u64) -> Value {
    match inner(reply) {
        Reply::Shell(cmd) if tool == "local_shell" => json!({"type": "local_shell_call",
            "id": format!("lsh_fake{id}"), "call_id": format!("call_fake{id}"),
            "status": "completed", "action": {"type": "exec",
                "command": ["bash", "-lc", cmd]}}),
        Reply::Shell(cmd) => {
            // Asking for escalation (to run outside the sandbox) is what
            // makes Codex ask the user in its default mode; a plain command
            // inside the workspace runs sandboxed without asking.
            let why = format!("Run {cmd}?");
            let args = match tool {
                "shell" => json!({"command": ["bash", "-lc", cmd],
                    "with_escalated_permissions": true, "justification": why}),
                "exec_command" => json!({"cmd": cmd,
                    "sandbox_permissions": "require_escalated", "justification": why}),
                _ => json!({"command": cmd,
                    "sandbox_permissions": "require_escalated", "justification": why}),
            };
            json!({"type": "function_call", "id": format!("fc_fake{id}"),
                   "call_id": format!("call_fake{id}"), "name": tool,
                   "arguments": args.to_string(), "status": "completed"})
        }
        Reply::Text(t) => json!({"type": "message", "id": format!("msg_fake{id}"),
            "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": t, "annotations": []}]}),
        Reply::Held(_) => json!({"type": "message", "id": format!("msg_fake{id}"),
            "role": "assistant", "status": "completed", "content": []}),
    }
}

/// The SSE of a Responses reply: (sent at once, sent after a release).
pub(super) fn openai_sse(reply: &Reply, tool: &str, id: u64) -> (String, String) {
    let resp_id = format!("resp_fake{id}");
    let start = event(
        "response.created",
        &json!({"type": "response.created", "response": {"id": resp_id, "status": "in_progress"}}),
    );
    let item = openai_item(reply, tool, id);
    let mut rest = String::new();
    if item["type"] == "message" {
        let mut opened = item.clone();
        opened["content"] = json!([]);
        opened["status"] = json!("in_progress");
        rest += &event(
            "response.output_item.added",
            &json!({"type": "response.output_item.added", "output_index": 0, "item": opened}),
        );
        let text = item["content"][0]["text"].as_str().unwrap_or_default();
        for d in deltas(text) {
            rest += &event(
                "response.output_text.delta",
                &json!({"type": "response.output_text.delta", "item_id": item["id"],
                        "output_index": 0, "content_index": 0, "delta": d}),
            );
        }
    } else {
        rest += &event(
            "response.output_item.added",
            &json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
        );
    }
    rest += &event(
        "response.output_item.done",
        &json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
    );
    rest += &event(
        "response.completed",
        &json!({"type": "response.completed", "response": {"id": resp_id, "status": "completed",
            "usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 110}}}),
    );
    (start, rest)
}
