//! Unit, wire-shape and property tests of the ACP event mapping.

use super::*;

mod mapping {
    use super::*;
    use lapis_protocol::Location;
    use serde_json::json;

    #[test]
    fn message_and_thought_stay_separate_with_ids_and_meta() {
        let mut m = UpdateMapper::default();
        let msg = m.map(
            json!({"sessionUpdate": "agent_message_chunk", "messageId": "m1",
            "content": {"type": "text", "text": "hi"}, "_meta": {"done": true}}),
        );
        assert_eq!(
            msg.unwrap(),
            Payload::MessageChunk(Chunk {
                text: Some("hi".into()),
                content: None,
                message_id: Some("m1".into()),
                meta: Some(json!({"done": true})),
            })
        );
        let thought = m.map(json!({"sessionUpdate": "agent_thought_chunk",
            "content": {"type": "text", "text": "hmm"}}));
        assert!(
            matches!(thought, Some(Payload::ThoughtChunk(ref c)) if c.text.as_deref() == Some("hmm"))
        );
        let image = m.map(json!({"sessionUpdate": "agent_message_chunk",
            "content": {"type": "image", "data": "AA", "mimeType": "image/png"}}));
        assert!(
            matches!(image, Some(Payload::MessageChunk(ref c)) if c.text.is_none() && c.content.is_some())
        );
    }

    #[test]
    fn a_tool_call_is_a_durable_pair_of_its_start_and_its_merged_finish() {
        let mut m = UpdateMapper::default();
        let start = m.map(
            json!({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Run tests",
            "kind": "execute", "status": "pending"}),
        );
        assert!(
            matches!(start, Some(Payload::ToolCall(ref i)) if i.status.as_deref() == Some("pending")),
            "{start:?}"
        );
        // Updates in between change the envelope only: no row, bodies
        // included (a diff, then terminal output, the latest wins).
        for update in [
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "in_progress",
                "rawInput": {"command": ["cargo", "test"]},
                "locations": [{"path": "/w/a.rs", "line": 3}]}),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "t1",
                "content": [{"type": "diff", "path": "/w/a.rs", "oldText": "a", "newText": "b"}]}),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "t1",
                "content": [{"type": "content", "content": {"type": "text", "text": "ok"}}]}),
        ] {
            assert_eq!(m.map(update), None);
        }
        let finish = m.map(
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed"}),
        );
        assert_eq!(
            finish,
            Some(Payload::ToolCall(Invocation {
                id: "t1".into(),
                title: Some("Run tests".into()),
                kind: Some("execute".into()),
                status: Some("completed".into()),
                locations: vec![Location {
                    path: "/w/a.rs".into(),
                    line: Some(3)
                }],
                command: Some("cargo test".into()),
                content: Some(
                    json!([{"type": "content", "content": {"type": "text", "text": "ok"}}])
                ),
                raw_input: Some(json!({"command": ["cargo", "test"]})),
                ..Invocation::default()
            }))
        );
        // Settled and journaled: nothing left to flush.
        assert!(m.flush().is_empty());
        let preview = m.preview(&json!({"toolCallId": "t1", "title": "Run again"}));
        assert_eq!(preview.title.as_deref(), Some("Run again"));
        assert_eq!(preview.status.as_deref(), Some("completed"));
    }

    #[test]
    fn an_unsettled_call_is_flushed_once_in_start_order_and_an_orphan_update_starts_one() {
        let mut m = UpdateMapper::default();
        for id in ["b", "a"] {
            assert!(
                m.map(json!({"sessionUpdate": "tool_call", "toolCallId": id, "status": "pending"}))
                    .is_some()
            );
        }
        for id in ["a", "b"] {
            let update = json!({"sessionUpdate": "tool_call_update", "toolCallId": id,
                "status": "in_progress", "rawInput": {"command": format!("run {id}")}});
            assert_eq!(m.map(update), None);
        }
        let flushed: Vec<(String, Option<String>)> = m
            .flush()
            .into_iter()
            .map(|p| match p {
                Payload::ToolCall(i) => (i.id, i.command),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            flushed,
            [
                ("b".to_owned(), Some("run b".to_owned())),
                ("a".to_owned(), Some("run a".to_owned()))
            ]
        );
        assert!(m.flush().is_empty(), "flushed once");
        // An update for a call never started is its start.
        let orphan = m.map(
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "c", "status": "in_progress"}),
        );
        assert!(matches!(orphan, Some(Payload::ToolCall(ref i)) if i.id == "c"));
        // A settled call updated again is journaled once more at the flush.
        m.map(json!({"sessionUpdate": "tool_call_update", "toolCallId": "c", "status": "failed"}))
            .expect("settles");
        assert_eq!(
            m.map(json!({"sessionUpdate": "tool_call_update", "toolCallId": "c", "title": "late"})),
            None
        );
        assert_eq!(m.flush().len(), 1);
    }

    #[test]
    fn plan_and_unknown_updates_are_observations() {
        let mut m = UpdateMapper::default();
        let plan = json!({"sessionUpdate": "plan", "entries": []});
        assert_eq!(
            m.map(plan.clone()).unwrap(),
            Payload::Observation(Observation::Noted {
                kind: "plan".into(),
                payload: plan
            })
        );
        assert!(
            matches!(m.map(json!({"x": 1})), Some(Payload::Observation(Observation::Noted { ref kind, .. })) if kind == "unknown")
        );
    }
}

mod wire_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn late_output_is_labelled_by_its_update_else_its_method() {
        let update = json!({"method": "session/update",
            "params": {"update": {"sessionUpdate": "agent_message_chunk"}}});
        assert_eq!(
            late_update(update.clone()),
            Payload::Observation(Observation::LateUpdate {
                kind: "agent_message_chunk".into(),
                payload: update
            })
        );
        let other = json!({"method": "fs/read_text_file"});
        assert_eq!(
            late_update(other.clone()).to_value(),
            json!({"type": "late", "kind": "fs/read_text_file", "payload": other})
        );
    }

    #[test]
    fn only_the_agents_own_output_shows_progress() {
        assert!(shows_agent_progress(&Payload::MessageChunk(Chunk::text(
            "x"
        ))));
        assert!(shows_agent_progress(
            &Observation::noted("plan", json!({})).into()
        ));
        assert!(!shows_agent_progress(&Observation::CancelSent.into()));
        assert!(!shows_agent_progress(
            &Observation::Stopped {
                stop_reason: "end_turn".into(),
                meta: None
            }
            .into()
        ));
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
        /// Any update maps (to an event, or to a tool call's envelope in
        /// memory) without panicking, and an event reads back from its
        /// stored form (it becomes a journal payload).
        #[test]
        fn any_update_maps_and_serializes(updates in proptest::collection::vec(json_value(), 1..8)) {
            let mut m = UpdateMapper::default();
            for u in updates {
                let Some(ev) = m.map(u) else { continue };
                let stored = ev.to_value();
                prop_assert!(stored.is_object());
                prop_assert_eq!(Payload::from_value(ev.kind(), stored), ev);
            }
        }
    }
}
