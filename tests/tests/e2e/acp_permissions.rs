//! The permission broker with a real agent: `ask` answers only with offered
//! option ids, deadlines answer reject-or-cancelled, `allow-all` approves
//! automatically except on restricted threads, concurrent requests are all
//! answered before the turn ends, and a cancel answers them `cancelled`.

use std::time::Duration;

use lapis_protocol::{Note, Observation, PermissionDecided};
use lapis_service::ApprovalPolicy;
use lapis_service::acp::{DecidedBy, Payload, PermissionAnswer, TurnOutcome};

use crate::acp::{AskMode, CancelOn, Recorder, cancel_sent, completed, fixture, request, run_with};

fn resolutions(hooks: &Recorder) -> Vec<(PermissionAnswer, DecidedBy)> {
    hooks
        .events()
        .into_iter()
        .filter_map(|e| match e {
            Payload::PermissionDecided(PermissionDecided {
                answer,
                decided_by: Some(by),
                ..
            }) => Some((answer, by)),
            _ => None,
        })
        .collect()
}

fn selected(id: &str) -> PermissionAnswer {
    PermissionAnswer::Selected {
        option_id: id.into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_forwards_the_chosen_option_to_the_agent() {
    let dir = tempfile::tempdir().unwrap();
    let req = request(fixture(&["--permissions", "1"]), dir.path());
    let (outcome, hooks) =
        run_with(req, |_| Recorder::new(AskMode::Answer("opt-allow_once"))).await;
    assert_eq!(outcome, completed());
    assert_eq!(hooks.reply(), "perm-0=opt-allow_once");
    let asked = hooks.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].invocation.id, "guarded-0");
    assert_eq!(asked[0].invocation.kind.as_deref(), Some("execute"));
    assert_eq!(asked[0].options.len(), 2);
    assert_eq!(
        resolutions(&hooks),
        [(selected("opt-allow_once"), DecidedBy::User)]
    );
    assert_eq!(
        hooks.count(|e| matches!(e, Payload::PermissionRequested(_))),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_that_was_not_offered_is_never_approval() {
    let dir = tempfile::tempdir().unwrap();
    let req = request(fixture(&["--permissions", "1"]), dir.path());
    let (outcome, hooks) = run_with(req, |_| Recorder::new(AskMode::Answer("allow"))).await;
    assert_eq!(outcome, completed());
    assert_eq!(hooks.reply(), "perm-0=cancelled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_request_is_rejected_if_possible_else_cancelled() {
    for (kinds, want, agent_saw) in [
        (
            "allow_once,reject_once",
            selected("opt-reject_once"),
            "opt-reject_once",
        ),
        (
            "allow_once,allow_always",
            PermissionAnswer::Cancelled,
            "cancelled",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut req = request(
            fixture(&["--permissions", "1", "--perm-kinds", kinds]),
            dir.path(),
        );
        req.limits.permission_timeout = Duration::from_millis(200);
        let (outcome, hooks) = run_with(req, |_| Recorder::new(AskMode::Never)).await;
        assert_eq!(outcome, completed());
        assert_eq!(hooks.reply(), format!("perm-0={agent_saw}"));
        assert_eq!(resolutions(&hooks), [(want, DecidedBy::Expired)]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_all_approves_automatically_and_journals_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut req = request(
        fixture(&[
            "--permissions",
            "2",
            "--perm-kinds",
            "reject_once,allow_always,allow_once",
        ]),
        dir.path(),
    );
    req.approval = ApprovalPolicy::AllowAll;
    let (outcome, hooks) = run_with(req, |_| Recorder::new(AskMode::Never)).await;
    assert_eq!(outcome, completed());
    assert_eq!(hooks.reply(), "perm-0=opt-allow_onceperm-1=opt-allow_once");
    assert!(hooks.asked.lock().unwrap().is_empty());
    assert_eq!(
        resolutions(&hooks),
        vec![(selected("opt-allow_once"), DecidedBy::Automatic); 2]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restricted_threads_and_requests_without_allow_options_still_ask() {
    for (restricted, kinds) in [(true, "allow_once,reject_once"), (false, "reject_once")] {
        let dir = tempfile::tempdir().unwrap();
        let mut req = request(
            fixture(&["--permissions", "1", "--perm-kinds", kinds]),
            dir.path(),
        );
        req.approval = ApprovalPolicy::AllowAll;
        req.restricted = restricted;
        // The fixture offers no restricted mode: let the turn run without it.
        req.spec.restricted.allow_unrestricted = true;
        let (outcome, hooks) =
            run_with(req, |_| Recorder::new(AskMode::Answer("opt-reject_once"))).await;
        assert_eq!(outcome, completed());
        assert_eq!(
            hooks.asked.lock().unwrap().len(),
            1,
            "restricted={restricted}"
        );
        assert_eq!(
            resolutions(&hooks),
            [(selected("opt-reject_once"), DecidedBy::User)]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_are_all_answered_before_the_turn_ends() {
    let dir = tempfile::tempdir().unwrap();
    let req = request(
        fixture(&["--permissions", "3", "--chunks", "1"]),
        dir.path(),
    );
    // The recorder answers only once all three are pending at once.
    let (outcome, hooks) = run_with(req, |_| {
        Recorder::new(AskMode::AnswerWhenPending("opt-allow_once", 3))
    })
    .await;
    assert_eq!(outcome, completed());
    assert_eq!(
        hooks.reply(),
        "perm-0=opt-allow_onceperm-1=opt-allow_onceperm-2=opt-allow_oncechunk0 "
    );
    assert_eq!(resolutions(&hooks).len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_answers_pending_requests_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let req = request(fixture(&["--permissions", "2", "--hang"]), dir.path());
    let (outcome, hooks) = run_with(req, |cancel| {
        let mut r = Recorder::new(AskMode::Never);
        r.cancel_on = Some((cancel, CancelOn::Ask));
        r
    })
    .await;
    assert_eq!(outcome, TurnOutcome::Cancelled { dispatched: true });
    assert_eq!(hooks.reply(), "perm-0=cancelledperm-1=cancelled");
    assert_eq!(
        resolutions(&hooks),
        vec![(PermissionAnswer::Cancelled, DecidedBy::Cancel); 2]
    );
    assert_eq!(hooks.count(cancel_sent), 1);
}

/// Elicitation as ACP v1 says (issue 29): a form with fields and URL mode
/// are answered "invalid params" and observed, even under `allow-all` —
/// the controller never invents input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elicitations_with_fields_or_urls_are_refused_never_answered() {
    for kind in ["fields", "url"] {
        let dir = tempfile::tempdir().unwrap();
        let mut req = request(fixture(&["--elicit", kind]), dir.path());
        req.approval = ApprovalPolicy::AllowAll;
        let (outcome, hooks) = run_with(req, |_| Recorder::new(AskMode::Never)).await;
        assert_eq!(outcome, completed());
        assert_eq!(hooks.reply(), r#"elicit-0={"error":-32602}"#, "{kind}");
        assert!(hooks.events().iter().any(|e| matches!(e,
            Payload::Observation(Observation::Note(Note::UnsupportedRequest(r)))
                if r.method == "elicitation/create" && !r.idle)));
        assert!(resolutions(&hooks).is_empty());
    }
}

/// An empty-form elicitation is a one-time approval through the same
/// broker as permissions: `allow-all` accepts it on an unrestricted
/// thread; on a restricted thread it is asked, and a user's decline goes
/// back as `decline`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_form_elicitation_is_a_one_time_approval() {
    let dir = tempfile::tempdir().unwrap();
    let mut req = request(fixture(&["--elicit", "empty"]), dir.path());
    req.approval = ApprovalPolicy::AllowAll;
    let (outcome, hooks) = run_with(req, |_| Recorder::new(AskMode::Never)).await;
    assert_eq!(outcome, completed());
    assert_eq!(hooks.reply(), r#"elicit-0={"action":"accept"}"#);
    assert_eq!(
        resolutions(&hooks),
        vec![(
            PermissionAnswer::Selected {
                option_id: "accept".into()
            },
            DecidedBy::Automatic
        )]
    );
    let asked = hooks.events().into_iter().find_map(|e| match e {
        Payload::PermissionRequested(r) => Some(r),
        _ => None,
    });
    let asked = asked.expect("journaled as a permission request");
    assert_eq!(
        asked.invocation.title.as_deref(),
        Some("Apply the migration?")
    );
    assert_eq!(asked.invocation.kind.as_deref(), Some("elicitation"));

    let dir = tempfile::tempdir().unwrap();
    let mut req = request(fixture(&["--elicit", "empty"]), dir.path());
    req.approval = ApprovalPolicy::AllowAll;
    req.restricted = true;
    // The fixture offers no restricted mode: let the turn run without it.
    req.spec.restricted.allow_unrestricted = true;
    let (outcome, hooks) = run_with(req, |_| Recorder::new(AskMode::Answer("decline"))).await;
    assert_eq!(outcome, completed());
    assert_eq!(hooks.reply(), r#"elicit-0={"action":"decline"}"#);
    assert_eq!(
        resolutions(&hooks),
        vec![(
            PermissionAnswer::Selected {
                option_id: "decline".into()
            },
            DecidedBy::User
        )]
    );
}
