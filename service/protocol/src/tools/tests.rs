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
    assert_eq!(qualified("crm", "find"), "crm.find");
    assert_eq!(split_qualified("crm.find"), Some(("crm", "find")));
    for bad in ["crm", "crm.", ".find", "a.b.c", "crm.fi nd"] {
        assert_eq!(split_qualified(bad), None, "{bad}");
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
