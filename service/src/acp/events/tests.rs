//! Unit, wire-shape and property tests of the ACP event mapping.

use super::*;

mod mapping {
    use super::*;
    use serde_json::json;

    #[test]
    fn message_and_thought_stay_separate_with_ids_and_meta() {
        let mut m = UpdateMapper::default();
        let msg = m.map(
            json!({"sessionUpdate": "agent_message_chunk", "messageId": "m1",
            "content": {"type": "text", "text": "hi"}, "_meta": {"done": true}}),
        );
        assert_eq!(
            msg,
            ActivityEvent::Message(ContentActivity {
                text: Some("hi".into()),
                content: None,
                message_id: Some("m1".into()),
                meta: Some(json!({"done": true})),
            })
        );
        let thought = m.map(json!({"sessionUpdate": "agent_thought_chunk",
            "content": {"type": "text", "text": "hmm"}}));
        assert!(
            matches!(thought, ActivityEvent::Reasoning(ref c) if c.text.as_deref() == Some("hmm"))
        );
        let image = m.map(json!({"sessionUpdate": "agent_message_chunk",
            "content": {"type": "image", "data": "AA", "mimeType": "image/png"}}));
        assert!(
            matches!(image, ActivityEvent::Message(ref c) if c.text.is_none() && c.content.is_some())
        );
    }

    #[test]
    fn tool_call_updates_merge_into_one_envelope() {
        let mut m = UpdateMapper::default();
        m.map(
            json!({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Read",
            "kind": "read", "status": "pending"}),
        );
        let ev = m.map(
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "t1",
            "status": "completed", "locations": [{"path": "/w/a.rs", "line": 3}]}),
        );
        assert_eq!(
            ev,
            ActivityEvent::Invocation(Invocation {
                id: "t1".into(),
                title: Some("Read".into()),
                kind: Some("read".into()),
                status: Some("completed".into()),
                locations: vec![Location {
                    path: "/w/a.rs".into(),
                    line: Some(3)
                }],
                ..Invocation::default()
            })
        );
        let preview = m.preview(&json!({"toolCallId": "t1", "title": "Read again"}));
        assert_eq!(preview.title.as_deref(), Some("Read again"));
        assert_eq!(preview.status.as_deref(), Some("completed"));
    }

    #[test]
    fn plan_and_unknown_updates_are_observations() {
        let mut m = UpdateMapper::default();
        let plan = json!({"sessionUpdate": "plan", "entries": []});
        assert_eq!(
            m.map(plan.clone()),
            ActivityEvent::Observation {
                kind: "plan".into(),
                payload: plan
            }
        );
        assert!(
            matches!(m.map(json!({"x": 1})), ActivityEvent::Observation { ref kind, .. } if kind == "unknown")
        );
    }
}

mod wire_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn payloads_use_camel_case_fields_and_snake_case_tags() {
        let ev = ActivityEvent::PermissionResolved {
            request_id: "r1".into(),
            answer: PermissionAnswer::Selected {
                option_id: "yes".into(),
            },
            decided_by: DecidedBy::TurnEnded,
        };
        assert_eq!(
            serde_json::to_value(&ev).unwrap(),
            json!({"type": "permission_resolved", "requestId": "r1",
                "answer": {"outcome": "selected", "optionId": "yes"}, "decidedBy": "turn_ended"})
        );
        let inv = ActivityEvent::Invocation(Invocation {
            id: "t".into(),
            raw_input: Some(json!(1)),
            ..Invocation::default()
        });
        assert_eq!(
            serde_json::to_value(&inv).unwrap(),
            json!({"type": "invocation", "id": "t", "rawInput": 1})
        );
    }
}

mod props {
    use super::*;
    use proptest::prelude::*;

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            "[a-z_]{0,12}".prop_map(Value::String),
            prop_oneof![
                Just("agent_message_chunk"),
                Just("agent_thought_chunk"),
                Just("tool_call"),
                Just("tool_call_update"),
                Just("plan"),
                Just("text")
            ]
            .prop_map(|s| Value::String(s.into())),
        ];
        leaf.prop_recursive(3, 24, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map(
                    prop_oneof![
                        Just("sessionUpdate".to_string()),
                        Just("toolCallId".to_string()),
                        Just("content".to_string()),
                        Just("type".to_string()),
                        Just("text".to_string()),
                        Just("locations".to_string()),
                        Just("status".to_string()),
                        "[a-z]{1,6}".prop_map(String::from)
                    ],
                    inner,
                    0..6
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Any update maps to some event without panicking, and the event
        /// always serializes (it becomes a journal payload).
        #[test]
        fn any_update_maps_and_serializes(updates in proptest::collection::vec(json_value(), 1..8)) {
            let mut m = UpdateMapper::default();
            for u in updates {
                let ev = m.map(u);
                prop_assert!(serde_json::to_value(&ev).is_ok());
            }
        }
    }
}
