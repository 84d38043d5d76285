use proptest::prelude::*;
use serde_json::json;

use super::*;

fn redacted(text: &str) -> String {
    redactor().redact_str(text).0.into_owned()
}

#[test]
fn every_sample_is_caught_with_its_typed_marker() {
    for s in sample_credentials() {
        let out = redacted(&format!("before {} after", s.text));
        assert!(!out.contains(&s.secret), "{}: {out}", s.detector);
        assert!(
            out.contains(&format!("[REDACTED:{}]", s.detector)),
            "{}: {out}",
            s.detector
        );
        assert!(
            out.starts_with("before ") && out.ends_with(" after"),
            "{out}"
        );
        // Idempotent: the markers match nothing.
        assert_eq!(redactor().redact_str(&out).1, 0, "{out}");
    }
}

#[test]
fn at_least_thirty_formats_and_every_detector_has_a_sample() {
    let samples = sample_credentials();
    assert!(samples.len() >= 30, "{}", samples.len());
    let names: Vec<&str> = redactor().names().collect();
    assert!(names.len() >= 30, "{}", names.len());
    for n in names {
        assert!(samples.iter().any(|s| s.detector == n), "no sample for {n}");
    }
}

/// The detector set is pinned: any change to the table changes this
/// digest, and must bump [`DETECTOR_SET_VERSION`] with it (and say so in
/// docs/security.md).
#[test]
fn the_detector_set_is_pinned_to_its_version() {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for (name, pattern) in detectors::DETECTORS {
        h.update(name.as_bytes());
        h.update([0]);
        h.update(pattern.as_bytes());
        h.update([0]);
    }
    let digest: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(
        (
            DETECTOR_SET_VERSION,
            detectors::DETECTORS.len(),
            digest.as_str()
        ),
        (3, 59, PINNED_DETECTOR_DIGEST),
        "the detector table changed: bump DETECTOR_SET_VERSION and re-pin"
    );
}

/// SHA-256 of detector set 3 (names and patterns, NUL-separated).
const PINNED_DETECTOR_DIGEST: &str =
    "6443ed133dc9ed541bd61a1eca0034b28091323242e179eb5ff6e16ce44a8eb0";

/// Prose near the new formats' keys is left alone.
#[test]
fn the_new_formats_leave_ordinary_prose_alone() {
    for text in [
        "Basic authentication is configured in the admin panel",
        "the authorization header is missing",
        "this machine has no password set",
        "a sig=short parameter",
        "the \"auth\": \"none\" setting",
        "client-key-data: present",
    ] {
        assert_eq!(redacted(text), text);
    }
}

#[test]
fn assignments_and_urls_keep_their_key_and_user() {
    assert_eq!(
        redacted("password=hunter2hunter2"),
        "password=[REDACTED:secret-assignment]"
    );
    assert_eq!(
        redacted("see postgres://admin:pw0rd@db:5432/x"),
        "see postgres://admin:[REDACTED:url-password]@db:5432/x"
    );
    assert_eq!(
        redacted("tokens: 5, the token budget"),
        "tokens: 5, the token budget"
    );
}

#[test]
fn ids_carrying_a_secret_are_omitted_whole_and_counts_add_up() {
    let secret = format!("ghp_{}", "Z".repeat(36));
    let mut v = json!({
        "type": "invocation", "id": secret, "toolCallId": secret, "request_id": secret,
        "requestId": "call-7", "messageId": "msg_01",
        "title": format!("push with {secret}"),
        "content": [{"text": secret}, {"messageId": secret}],
    });
    assert_eq!(redactor().redact_value(&mut v), 6);
    assert_eq!(v["id"], OMITTED_ID);
    assert_eq!(v["toolCallId"], OMITTED_ID);
    assert_eq!(v["request_id"], OMITTED_ID);
    assert_eq!(v["content"][1]["messageId"], OMITTED_ID);
    // Ids without a credential stay exactly as they are.
    assert_eq!(v["requestId"], "call-7");
    assert_eq!(v["messageId"], "msg_01");
    assert_eq!(v["title"], "push with [REDACTED:github-token]");
    assert_eq!(v["content"][0]["text"], "[REDACTED:github-token]");
}

/// Streams `parts` through a hold-back and redacts each released piece as
/// the journal would; returns what would be stored.
fn stream(parts: &[&str]) -> Vec<String> {
    let mut hold = StreamHold::default();
    let mut out: Vec<(String, ())> = parts
        .iter()
        .flat_map(|p| hold.push((*p).to_owned(), ()))
        .collect();
    out.extend(hold.finish());
    out.iter().map(|(p, _)| redacted(p)).collect()
}

#[test]
fn a_secret_split_across_chunks_at_any_point_is_still_caught() {
    for s in sample_credentials() {
        let text = format!("here it is: {} and more text follows", s.text);
        for cut in (1..text.len()).filter(|c| text.is_char_boundary(*c)) {
            let stored = stream(&[&text[..cut], &text[cut..]]);
            let all = stored.concat();
            assert!(
                !all.contains(&s.secret),
                "{} cut at {cut}: {stored:?}",
                s.detector
            );
            for piece in &stored {
                // No fragment of the secret's distinctive start leaks either.
                let head: String = s.secret.chars().take(12).collect();
                assert!(
                    !piece.contains(&head),
                    "{} cut at {cut}: {stored:?}",
                    s.detector
                );
            }
        }
    }
}

#[test]
fn plain_streams_are_released_as_they_come() {
    assert_eq!(
        stream(&["hello f", "rom the", " bars"]),
        ["hello f", "rom the", " bars"]
    );
    // A chunk ending in what could start a token waits, then goes unchanged.
    let mut hold = StreamHold::default();
    assert!(hold.push("ends in g".to_owned(), 1).is_empty());
    assert_eq!(
        hold.push("ood cheer ".to_owned(), 2),
        [("ends in g".to_owned(), 1), ("ood cheer ".to_owned(), 2)]
    );
    assert!(hold.is_empty());
    assert_eq!(stream(&["waiting for cancel; "]), ["waiting for cancel; "]);
}

#[test]
fn stderr_swallows_a_pem_block_line_by_line() {
    let mut r = StderrRedactor::default();
    let pem = &sample_credentials()[0].text;
    let mut logged: Vec<String> = pem
        .lines()
        .filter_map(|l| r.line(l))
        .map(|l| l.into_owned())
        .collect();
    logged.extend(r.line("after the key").map(|l| l.into_owned()));
    assert_eq!(
        logged,
        [
            "[REDACTED:private-key]",
            "[REDACTED:private-key]",
            "after the key"
        ]
    );
}

/// Prose that cannot form a credential: lowercase words and punctuation.
fn prose() -> impl Strategy<Value = String> {
    proptest::collection::vec("[a-z]{1,12}[ ,.!?\n]{1,2}", 0..40).prop_map(|w| w.concat())
}

proptest! {
    #[test]
    fn non_secret_text_is_unchanged(text in prose()) {
        let (out, n) = redactor().redact_str(&text);
        prop_assert_eq!(n, 0);
        prop_assert_eq!(out.as_ref(), text.as_str());
        prop_assert_eq!(stream(&[&text]).concat(), text);
    }

    #[test]
    fn plain_ids_survive_and_secret_ids_are_omitted(
        text in prose(),
        id in "[A-Za-z0-9_-]{1,64}",
        pick in 0usize..50,
    ) {
        let samples = sample_credentials();
        let s = &samples[pick % samples.len()];
        let id_like_secret = s.text.clone();
        let mut v = json!({
            "id": id, "toolCallId": id_like_secret, "requestId": id,
            "text": format!("{text}{}", s.text), "plain": text,
        });
        redactor().redact_value(&mut v);
        prop_assert_eq!(&v["id"], &json!(id));
        prop_assert_eq!(&v["requestId"], &json!(id));
        prop_assert_eq!(&v["toolCallId"], &json!(OMITTED_ID));
        prop_assert_eq!(&v["plain"], &json!(text));
        prop_assert!(!v["text"].as_str().unwrap().contains(&s.secret));
    }
}

proptest! {
    /// The literal prefilter never rules out text a detector matches: text
    /// built from token characters, separators and fragments of every
    /// sample (so near-misses and real matches both occur).
    #[test]
    fn the_prefilter_never_hides_a_match(
        parts in proptest::collection::vec(
            prop_oneof![
                "[A-Za-z0-9_.:=/+~ -]{0,40}",
                (0..sample_credentials().len(), 0usize..200, 0usize..200).prop_map(|(i, a, b)| {
                    let t = &sample_credentials()[i].text;
                    let (a, b) = (a.min(t.len()), b.min(t.len()));
                    let (a, b) = (a.min(b), a.max(b));
                    t.get(a..b).unwrap_or(t).to_owned()
                }),
            ],
            0..6,
        )
    ) {
        let text: String = parts.concat();
        let r = redactor();
        if r.set.is_match(&text) {
            prop_assert!(r.prefilter.candidate(&text), "{text:?}");
        }
    }
}

#[test]
fn ordinary_prose_and_code_pass_the_prefilter_untouched() {
    let r = redactor();
    for text in [
        "chunk 7: the quick brown fox jumps over the lazy dog",
        "fn main() { println!(\"hello, world\"); }",
        "Résumé: naïve café — ça marche.",
    ] {
        assert!(!r.prefilter.candidate(text), "{text}");
        assert!(!r.set.is_match(text), "{text}");
    }
}
