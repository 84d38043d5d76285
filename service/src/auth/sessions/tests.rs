//! The session rules, through `hello`, `check` and `revoke`.

use super::*;
use crate::auth::persist::MemorySessions;
use crate::auth::storage::read_only_refusal;
use crate::domain::ManualClock;
use lapis_protocol::{PROTOCOL, Scope};

const SECRET: &str = "lapis_0000000000000000000000000000000000000000000000000000000000000001";

fn authority(clock: Arc<ManualClock>) -> Authority {
    let tokens = vec![TokenSpec {
        name: "owner".into(),
        principal: "owner".into(),
        secret: SECRET.into(),
        scopes: None,
        applications: None,
        workspaces: None,
        providers: None,
    }];
    let persist = Arc::new(MemorySessions::new(clock.clone()));
    Authority::new(tokens, 100, clock, persist)
}

fn token(app: &str) -> HelloParams {
    HelloParams {
        protocol: PROTOCOL.into(),
        token: Some(SECRET.into()),
        bearer: None,
        application: Some(app.into()),
        ticket: None,
    }
}

fn bearer(b: &str) -> HelloParams {
    HelloParams {
        protocol: PROTOCOL.into(),
        token: None,
        bearer: Some(b.into()),
        application: None,
        ticket: None,
    }
}

fn code(e: RpcError) -> ErrorCode {
    e.error_code().unwrap()
}

#[test]
fn token_issues_once_then_resumes_without_bearer() {
    let a = authority(Arc::new(ManualClock::new(1000)));
    let first = a.hello(&token("app")).unwrap();
    let bearer_value = first.bearer.clone().expect("new session returns a bearer");
    let again = a.hello(&token("app")).unwrap();
    assert_eq!(again.session.id, first.session.id);
    assert!(again.bearer.is_none());
    let via_bearer = a.hello(&bearer(&bearer_value)).unwrap();
    assert_eq!(via_bearer.session.id, first.session.id);
    assert!(via_bearer.bearer.is_none());
    assert_ne!(first.session.bearer_sha256, bearer_value);
    let other_app = a.hello(&token("other")).unwrap();
    assert_ne!(other_app.session.id, first.session.id);
    assert_eq!(first.session.scopes, Scope::ALL.to_vec());
}

#[test]
fn wrong_token_and_unknown_bearer_fail() {
    let a = authority(Arc::new(ManualClock::new(0)));
    let mut p = token("app");
    p.token = Some(format!("{SECRET}x"));
    assert_eq!(code(a.hello(&p).unwrap_err()), ErrorCode::Unauthenticated);
    assert_eq!(
        code(a.hello(&bearer("lapis_s_nope")).unwrap_err()),
        ErrorCode::Unauthenticated
    );
    let mut both = token("app");
    both.bearer = Some("x".into());
    assert_eq!(code(a.hello(&both).unwrap_err()), ErrorCode::InvalidRequest);
    let mut bad_app = token("app");
    bad_app.application = Some("has space".into());
    assert_eq!(
        code(a.hello(&bad_app).unwrap_err()),
        ErrorCode::InvalidRequest
    );
}

#[test]
fn revoked_and_expired_fail_closed_and_token_reissues() {
    let clock = Arc::new(ManualClock::new(0));
    let a = authority(clock.clone());
    let first = a.hello(&token("app")).unwrap();
    let b1 = first.bearer.unwrap();
    a.revoke(&first.session, None).unwrap();
    assert_eq!(
        code(a.hello(&bearer(&b1)).unwrap_err()),
        ErrorCode::Unauthenticated
    );
    assert!(a.check(&first.session.id).is_err());
    let second = a.hello(&token("app")).unwrap();
    assert_ne!(second.session.id, first.session.id);
    let b2 = second.bearer.unwrap();
    clock.advance(100);
    let err = a.hello(&bearer(&b2)).unwrap_err();
    assert_eq!(code(err.clone()), ErrorCode::Unauthenticated);
    assert!(err.message.contains("expired"));
    assert!(a.check(&second.session.id).is_err());
}

#[test]
fn a_token_pinned_to_applications_refuses_others() {
    let tokens = vec![TokenSpec {
        name: "bot".into(),
        principal: "owner".into(),
        secret: SECRET.into(),
        scopes: None,
        applications: Some(vec!["bot".into()]),
        workspaces: None,
        providers: None,
    }];
    let clock = Arc::new(ManualClock::new(0));
    let a = Authority::new(tokens, 100, clock, Arc::new(MemorySessions::default()));
    assert!(a.hello(&token("bot")).is_ok());
    assert_eq!(
        code(a.hello(&token("editor")).unwrap_err()),
        ErrorCode::Forbidden
    );
}

#[test]
fn sessions_survive_through_persistence() {
    let clock = Arc::new(ManualClock::new(0));
    let persist = Arc::new(MemorySessions::new(clock.clone()));
    let tokens = vec![TokenSpec {
        name: "owner".into(),
        principal: "owner".into(),
        secret: SECRET.into(),
        scopes: None,
        applications: None,
        workspaces: None,
        providers: None,
    }];
    let a = Authority::new(tokens.clone(), 100, clock.clone(), persist.clone());
    let b = a.hello(&token("app")).unwrap().bearer.unwrap();
    let stored = persist.by_bearer_hash(&hash_bearer(&b)).unwrap().unwrap();
    assert_ne!(stored.bearer_sha256, b);
    let reopened = Authority::new(tokens, 100, clock, persist);
    let resumed = reopened.hello(&bearer(&b)).unwrap();
    assert_eq!(resumed.session.id, stored.id);
    // The token resumes the stored session too, without a new bearer.
    assert!(reopened.hello(&token("app")).unwrap().bearer.is_none());
}

#[test]
fn a_full_disk_issues_a_read_only_session_in_memory_until_it_can_write() {
    let clock = Arc::new(ManualClock::new(0));
    let persist = Arc::new(MemorySessions::new(clock.clone()));
    let tokens = vec![TokenSpec {
        name: "owner".into(),
        principal: "owner".into(),
        secret: SECRET.into(),
        scopes: None,
        applications: None,
        workspaces: None,
        providers: None,
    }];
    let a = Authority::new(tokens, 100, clock, persist.clone());
    let stored = a.hello(&token("before")).unwrap();
    persist.refuse_issue(Some("disk_full"));
    // A session stored before the disk filled resumes as it was.
    let resumed = a.hello(&token("before")).unwrap();
    assert_eq!(resumed.session.id, stored.session.id);
    assert_eq!(resumed.session.read_only, None);
    // A fresh credential gets a read-only session: reads only, no
    // bearer, not stored, the same one on the next hello.
    let ro = a.hello(&token("fresh")).unwrap();
    assert!(ro.bearer.is_none());
    assert_eq!(ro.session.read_only, Some("disk_full"));
    assert_eq!(
        ro.session.scopes,
        vec![Scope::StatusRead, Scope::WorkspacesRead, Scope::ThreadsRead]
    );
    assert_eq!(ro.session.view().read_only.as_deref(), Some("disk_full"));
    assert!(a.check(&ro.session.id).is_ok());
    assert!(a.token_grants(&ro.session, Scope::TurnsWrite));
    assert!(!ro.session.has(Scope::TurnsWrite));
    assert_eq!(a.hello(&token("fresh")).unwrap().session.id, ro.session.id);
    assert!(persist.by_credential("owner:fresh").unwrap().is_none());
    // Space returns: the next hello issues a stored, full session.
    persist.refuse_issue(None);
    let full = a.hello(&token("fresh")).unwrap();
    assert_ne!(full.session.id, ro.session.id);
    assert!(full.bearer.is_some());
    assert_eq!(full.session.read_only, None);
    assert_eq!(full.session.scopes, Scope::ALL.to_vec());
    // A write of the read-only session names the condition.
    assert_eq!(
        read_only_refusal("disk_full", Scope::TurnsWrite).error_code(),
        Some(ErrorCode::StorageUnavailable)
    );
}

/// A token's remembered sessions are bounded (issue 43 item 4): fresh
/// applications past the bound evict the oldest sessions, which end at
/// once — their connections' checks fail, revocation watchers wake, their
/// bearers are unknown — and the authority's cache stays bounded too.
#[test]
fn a_tokens_sessions_are_bounded_and_the_evicted_end_at_once() {
    let clock = Arc::new(ManualClock::ticking(1_000_000, 1));
    let a = authority(clock).with_session_bound(3);
    let watch = a.revocations();
    let first = a.hello(&token("app-0")).unwrap();
    let first_bearer = first.bearer.unwrap();
    for n in 1..3 {
        a.hello(&token(&format!("app-{n}"))).unwrap();
    }
    assert!(a.check(&first.session.id).is_ok(), "within the bound");
    assert!(!watch.has_changed().unwrap());
    for n in 3..50 {
        a.hello(&token(&format!("app-{n}"))).unwrap();
    }
    let err = a.check(&first.session.id).unwrap_err();
    assert_eq!(err.error_code(), Some(ErrorCode::Unauthenticated));
    assert!(watch.has_changed().unwrap(), "holders re-check at once");
    let err = a.hello(&bearer(&first_bearer)).unwrap_err();
    assert_eq!(err.error_code(), Some(ErrorCode::Unauthenticated));
    assert_eq!(a.sessions.lock().unwrap().len(), 3, "the cache is bounded");
    // The newest stay and resume.
    let newest = a.hello(&token("app-49")).unwrap();
    assert!(newest.bearer.is_none(), "resumed, not issued");
}

/// Read-only sessions (the store cannot write) are bounded per token the
/// same way, in memory.
#[test]
fn read_only_sessions_are_bounded_per_token() {
    let clock = Arc::new(ManualClock::ticking(1_000_000, 1));
    let persist = Arc::new(MemorySessions::new(clock.clone()));
    let tokens = vec![TokenSpec {
        name: "owner".into(),
        principal: "owner".into(),
        secret: SECRET.into(),
        scopes: None,
        applications: None,
        workspaces: None,
        providers: None,
    }];
    let a = Authority::new(tokens, 100, clock, persist.clone()).with_session_bound(2);
    persist.refuse_issue(Some("disk_full"));
    let ids: Vec<String> = (0..10)
        .map(|n| a.hello(&token(&format!("ro-{n}"))).unwrap().session.id)
        .collect();
    assert_eq!(a.sessions.lock().unwrap().len(), 2);
    assert!(a.check(&ids[9]).is_ok());
    assert!(a.check(&ids[0]).is_err());
}

/// An application token: bound to `bot`, without the cross-application
/// scopes by default; the owner's token holds every scope.
fn bot_token(scopes: Option<Vec<Scope>>) -> TokenSpec {
    TokenSpec {
        name: "bot".into(),
        principal: "owner".into(),
        secret: SECRET.into(),
        scopes,
        applications: Some(vec!["bot".into()]),
        workspaces: None,
        providers: None,
    }
}

#[test]
fn an_application_token_holds_no_cross_application_scope_by_default() {
    let clock = Arc::new(ManualClock::new(0));
    let a = Authority::new(
        vec![bot_token(None)],
        100,
        clock.clone(),
        Arc::new(MemorySessions::new(clock)),
    );
    let s = a.hello(&token("bot")).unwrap().session;
    assert!(!a.is_owner(&s));
    assert!(s.scopes.iter().all(|s| !s.crosses_applications()));
    assert!(s.scopes.contains(&Scope::TurnsResolve));
    let owner = authority(Arc::new(ManualClock::new(0)));
    let o = owner.hello(&token("cli")).unwrap().session;
    assert!(owner.is_owner(&o));
    assert_eq!(o.scopes, Scope::ALL.to_vec());
}

#[test]
fn replacing_tokens_revokes_a_removed_tokens_sessions_and_narrows_the_rest() {
    let clock = Arc::new(ManualClock::new(0));
    let persist = Arc::new(MemorySessions::new(clock.clone()));
    // Issued while the token granted every scope (as before the upgrade).
    let a = Authority::new(
        vec![bot_token(Some(Scope::ALL.to_vec()))],
        100,
        clock.clone(),
        persist.clone(),
    );
    let s = a.hello(&token("bot")).unwrap().session;
    let mut revocations = a.revocations();
    assert!(
        a.check(&s.id)
            .unwrap()
            .scopes
            .contains(&Scope::PermissionsRespondAny)
    );
    // The same configuration again: nothing ends.
    assert_eq!(
        a.replace_tokens(vec![bot_token(Some(Scope::ALL.to_vec()))]),
        0
    );
    assert!(!revocations.has_changed().unwrap());
    // The same token, its scopes back to the default: an edited token is
    // a new one; its old session ends, the next `hello` gets the new set.
    assert_eq!(a.replace_tokens(vec![bot_token(None)]), 1);
    assert!(revocations.has_changed().unwrap());
    assert!(a.check(&s.id).is_err());
    let s = a.hello(&token("bot")).unwrap().session;
    assert!(s.scopes.iter().all(|s| !s.crosses_applications()));
    assert_eq!(a.hello(&token("bot")).unwrap().session.id, s.id);
    // Removed: revoked at once, and holders are told.
    revocations.borrow_and_update();
    let other = TokenSpec {
        name: "other".into(),
        secret: "lapis_0000000000000000000000000000000000000000000000000000000000000002".into(),
        ..bot_token(None)
    };
    assert_eq!(a.replace_tokens(vec![other.clone()]), 1);
    assert!(revocations.has_changed().unwrap());
    let err = a.check(&s.id).unwrap_err();
    assert!(err.message.contains("revoked"), "{}", err.message);
    // Back under its old name, the old session stays revoked (durably).
    a.replace_tokens(vec![bot_token(None), other]);
    assert!(a.check(&s.id).is_err());
    let fresh = a.hello(&token("bot")).unwrap().session;
    assert_ne!(fresh.id, s.id);
}

/// A stored session the cache never held (issued before a restart) is
/// not revived by a token re-added under the same name with another
/// secret or principal: the credential names the token's identity.
#[test]
fn a_token_readded_under_its_name_never_revives_a_stored_session() {
    let clock = Arc::new(ManualClock::new(0));
    let persist = Arc::new(MemorySessions::new(clock.clone()));
    let first = Authority::new(vec![bot_token(None)], 100, clock.clone(), persist.clone());
    let issued = first.hello(&token("bot")).unwrap();
    let bearer = issued.bearer.unwrap();
    // A restart with the token replaced: same name, another secret.
    let readded = TokenSpec {
        secret: "lapis_0000000000000000000000000000000000000000000000000000000000000009".into(),
        ..bot_token(None)
    };
    let second = Authority::new(vec![readded.clone()], 100, clock.clone(), persist.clone());
    let err = second.hello(&super::tests::bearer(&bearer)).unwrap_err();
    assert_eq!(code(err), ErrorCode::Unauthenticated);
    let mut by_token = token("bot");
    by_token.token = Some(readded.secret.clone());
    let fresh = second.hello(&by_token).unwrap().session;
    assert_ne!(fresh.id, issued.session.id);
    // The same secret under another principal does not revive it either.
    let moved = TokenSpec {
        principal: "someone-else".into(),
        ..bot_token(None)
    };
    let third = Authority::new(vec![moved], 100, clock, persist);
    assert!(third.hello(&super::tests::bearer(&bearer)).is_err());
    let again = third.hello(&token("bot")).unwrap().session;
    assert_eq!(again.principal, "someone-else");
    assert_ne!(again.id, issued.session.id);
}
