use serde_json::json;

use super::*;

fn endpoint(v: Value) -> ToolsRegister {
    serde_json::from_value(v).unwrap()
}

fn code(r: Result<(), ToolRefusal>) -> &'static str {
    r.unwrap_err().code().as_str()
}

#[test]
fn a_valid_endpoint_passes_and_each_rule_has_its_code() {
    let ok = endpoint(json!({"endpoint": "crm", "capture": true, "tools": [
        {"name": "find", "description": "Find a contact", "inputSchema": {"type": "object"}},
        {"name": "update", "inputSchema": {"type": "object"}, "mutating": true}]}));
    validate_endpoint(&ok).unwrap();
    let mut bad = ok.clone();
    bad.endpoint = "crm.v2".into();
    assert_eq!(code(validate_endpoint(&bad)), "tool_invalid");
    let mut bad = ok.clone();
    bad.tools[1].name = "find".into();
    assert_eq!(code(validate_endpoint(&bad)), "tool_invalid");
    let mut bad = ok.clone();
    bad.tools[0].input_schema = json!({"type": "string"});
    assert_eq!(code(validate_endpoint(&bad)), "tool_invalid");
    let mut bad = ok.clone();
    bad.tools.clear();
    assert_eq!(code(validate_endpoint(&bad)), "tool_invalid");
    let mut big = ok.clone();
    big.tools[0].input_schema =
        json!({"type": "object", "description": "x".repeat(MAX_TOOL_SCHEMA_BYTES)});
    assert_eq!(code(validate_endpoint(&big)), "tool_limit_exceeded");
    let mut many = ok.clone();
    many.tools = (0..=MAX_TOOLS)
        .map(|i| ToolSpec {
            name: format!("t{i}"),
            description: String::new(),
            input_schema: json!({"type": "object"}),
            mutating: false,
        })
        .collect();
    assert_eq!(code(validate_endpoint(&many)), "tool_limit_exceeded");
    let mut long = ok;
    long.tools[0].description = "d".repeat(MAX_TOOL_DESCRIPTION_BYTES + 1);
    assert_eq!(code(validate_endpoint(&long)), "tool_limit_exceeded");
}

#[test]
fn bindings_and_qualified_names() {
    validate_binding(&["crm".into(), "mail".into()]).unwrap();
    assert_eq!(
        code(validate_binding(&["crm".into(), "crm".into()])),
        "tool_invalid"
    );
    let many: Vec<String> = (0..=MAX_TOOL_ENDPOINTS).map(|i| format!("e{i}")).collect();
    assert_eq!(code(validate_binding(&many)), "tool_limit_exceeded");
    assert_eq!(qualified("crm", "find"), "crm__find");
    assert_eq!(split_qualified("crm__find"), Some(("crm", "find")));
    assert_eq!(
        split_qualified("crm__find__all"),
        Some(("crm", "find__all"))
    );
    for bad in [
        "crm",
        "crm.find",
        "crm__",
        "__find",
        "crm___find",
        "crm__fi nd",
    ] {
        assert_eq!(split_qualified(bad), None, "{bad}");
    }
    for bad in ["a__b", "crm_"] {
        assert_eq!(
            code(validate_binding(&[bad.into()])),
            "tool_invalid",
            "{bad}"
        );
    }
    assert_eq!(idempotency_key("turn_1", "call_2"), "turn_1:call_2");
}

#[test]
fn refusal_messages_never_carry_arguments() {
    let r = ToolRefusal::Unavailable {
        endpoint: "crm".into(),
    };
    assert_eq!(r.code(), ErrorCode::ToolEndpointUnavailable);
    assert!(r.to_string().contains("crm"));
    assert_eq!(ToolRefusal::Restricted.code().as_str(), "tools_restricted");
}

/// The function-name rule of the OpenAI and Anthropic APIs.
fn model_api_accepts(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

#[test]
fn every_name_offered_to_an_agent_is_one_model_apis_accept_and_splits_back() {
    let endpoints = ["crm", "a", "mail-v2", "x_y", "E9"];
    let tools = ["find", "create_ticket", "a", "b__c", "t_", "Z-9"];
    for e in endpoints {
        for t in tools {
            let r = endpoint(json!({"endpoint": e, "tools": [
                {"name": t, "inputSchema": {"type": "object"}}]}));
            validate_endpoint(&r).unwrap();
            let name = qualified(e, t);
            assert!(model_api_accepts(&name), "{name}");
            assert!(offerable_name(&name), "{name}");
            assert_eq!(split_qualified(&name), Some((e, t)), "{name}");
        }
    }
    // The controller's own tools are offered too; they never look joined.
    for provided in [
        crate::memory::MEMORY_SEARCH_TOOL,
        crate::memory::MEMORY_READ_TOOL,
    ] {
        assert!(model_api_accepts(provided), "{provided}");
        assert_eq!(split_qualified(provided), None, "{provided}");
    }
}

#[test]
fn tools_register_refuses_a_name_that_cannot_be_offered() {
    // Endpoint names that would make the join ambiguous.
    for bad in ["a__b", "crm_", "crm.v2"] {
        let r = endpoint(json!({"endpoint": bad, "tools": [
            {"name": "find", "inputSchema": {"type": "object"}}]}));
        assert_eq!(code(validate_endpoint(&r)), "tool_invalid", "{bad}");
    }
    // A join over 64 bytes, though each part alone is within 64.
    let long = endpoint(json!({"endpoint": "e".repeat(31), "tools": [
        {"name": "t".repeat(32), "inputSchema": {"type": "object"}}]}));
    let refusal = validate_endpoint(&long).unwrap_err();
    assert_eq!(refusal.code().as_str(), "tool_invalid");
    assert!(refusal.to_string().contains("64"), "{refusal}");
    let fits = endpoint(json!({"endpoint": "e".repeat(31), "tools": [
        {"name": "t".repeat(31), "inputSchema": {"type": "object"}}]}));
    validate_endpoint(&fits).unwrap();
    assert_eq!(qualified(&"e".repeat(31), &"t".repeat(31)).len(), 64);
}
