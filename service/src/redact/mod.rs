//! Redaction of credentials before anything reaches durable storage.
//!
//! # What runs where
//! - Every journal payload is redacted before its row is written
//!   ([`Redactor::redact_value`]): every string of the JSON payload except
//!   the values of id fields (`id`, `*Id`, `*_id`, `*Ids`): ids are
//!   structure, not content, and are never partly rewritten; an id that
//!   carries a detected credential is replaced whole with [`OMITTED_ID`]. Streamed appends are redacted (and
//!   serialized) where they are submitted, on the caller's thread, so the
//!   store's single writer does not pay for it; the operations' own events
//!   are redacted on the writer (`store::journal::ReadyPayload` is the only
//!   way a payload reaches the events table). The number of markers
//!   inserted is added to the turn's `redactions` count in the same
//!   transaction as the row.
//! - Every agent stderr line is redacted before it is logged
//!   ([`StderrRedactor`], which also swallows the body lines of a PEM block);
//!   a metadata-only thread's agent stderr is not logged at all.
//!
//! # Whole logical blocks
//! A secret split across two streamed chunks would pass two independent
//! scans. The streamed-text path (`engine::hooks`) therefore holds back the
//! tail of a message or reasoning chunk that could be the start of a secret
//! ([`Redactor::hold_from`]: an unterminated PEM block, a known token prefix
//! or a fragment of one, an assignment key waiting for its value, a match
//! running to the end of the text), and sends it prefixed to the next chunk
//! of the same message, or alone when the message ends. The hold is bounded
//! ([`MAX_HOLD_BYTES`]); past it text is released and a redacted partial
//! block (an unterminated PEM block is redacted to the end of its chunk) is
//! the worst case.
//!
//! # Markers
//! A match is replaced with `[REDACTED:<detector>]`; a detector with a
//! capture group `s` replaces only that group, so `password=[REDACTED:…]`
//! keeps its key. Replacement is idempotent: no detector matches a marker.
//!
//! A literal prefilter ([`prefilter`]) answers "could anything match" first
//! (almost always no, at memory-scan speed); then one compiled [`RegexSet`]
//! answers "does anything match" in one pass; only matched detectors then
//! run their own regex. Word boundaries are ASCII (`(?-u:\b)`), so the
//! regexes run on their DFAs for any text, non-ASCII included.

#[cfg(any(test, feature = "test-support"))]
mod corpus;
mod detectors;
mod hold;
mod prefilter;
mod stderr;

#[cfg(any(test, feature = "test-support"))]
pub use corpus::{Sample, sample_credentials};
#[cfg(test)]
use detectors::DETECTOR_SET_VERSION;

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::{Regex, RegexSet};
use serde_json::Value;

use detectors::DETECTORS;
pub(crate) use hold::StreamHold;
use hold::TOKEN_PREFIXES;
pub(crate) use stderr::StderrRedactor;

/// What an id field (`id`, `*Id`, `*_id`, `*Ids`) that carries a detected
/// credential becomes: the whole value is omitted.
pub(crate) const OMITTED_ID: &str = "[OMITTED:id]";

/// The longest text held back from a stream while it could still become a
/// secret; beyond it the text is released (redacted as it stands).
pub(crate) const MAX_HOLD_BYTES: usize = 64 * 1024;

/// The compiled detectors. Build once ([`redactor`]).
#[derive(Debug)]
pub(crate) struct Redactor {
    /// The literal scan that rules most text out before the set runs.
    prefilter: prefilter::Prefilter,
    /// All patterns, for the one-pass "anything here?" check.
    set: RegexSet,
    /// `(name, regex, marker)` in table order.
    detectors: Vec<(&'static str, Regex, String)>,
    /// An assignment key (or `Bearer`) at the end of the text, with its
    /// value not yet ended.
    pending: Regex,
    /// [`TOKEN_PREFIXES`], lowercased once.
    prefixes: Vec<String>,
    /// The same prefixes as one automaton: the leftmost occurrence of any of
    /// them in a run, in one pass (a `str::find` per prefix built a
    /// searcher per prefix per streamed chunk).
    prefix_scan: aho_corasick::AhoCorasick,
}

/// A detector pattern as compiled: `\b` is the ASCII word boundary, which
/// the regex DFAs support on any text (a Unicode `\b` makes them give up on
/// the first non-ASCII byte and fall back to a much slower engine).
fn ascii_boundaries(pattern: &str) -> String {
    pattern.replace(r"\b", r"(?-u:\b)")
}

/// The process-wide redactor (compiled on first use).
pub(crate) fn redactor() -> &'static Redactor {
    static REDACTOR: LazyLock<Redactor> = LazyLock::new(Redactor::new);
    &REDACTOR
}

/// Whether a JSON object key names an id (whose value is never redacted).
fn is_id_key(key: &str) -> bool {
    key == "id" || key.ends_with("Id") || key.ends_with("_id") || key.ends_with("Ids")
}

impl Redactor {
    fn new() -> Redactor {
        let set = RegexSet::new(DETECTORS.iter().map(|(_, p)| ascii_boundaries(p)))
            .expect("detectors compile");
        let detectors = DETECTORS
            .iter()
            .map(|(name, p)| {
                (
                    *name,
                    Regex::new(&ascii_boundaries(p)).expect("detector compiles"),
                    format!("[REDACTED:{name}]"),
                )
            })
            .collect();
        let pending = Regex::new(concat!(
            r#"(?i)(?:(?:password|passwd|pwd|secret|token|key|client-key-data)["']?\s*(?:[:=]\s*["']?[^\s"'`&;,]*)?"#,
            r"|bearer\s*[^\s]*",
            r#"|authorization["']?\s*(?:[:=]\s*["']?(?:basic\s*[^\s]*|[a-z]{0,5}))?"#,
            r#"|"auth"\s*(?::\s*"?[A-Za-z0-9+/=]*)?"#,
            // A `.netrc` entry is held to the end of its line.
            r"|\bmachine\b[^\n]*",
            r")\z",
        ))
        .expect("pending pattern compiles");
        let prefixes: Vec<String> = TOKEN_PREFIXES
            .iter()
            .map(|p| p.to_ascii_lowercase())
            .collect();
        let prefix_scan = aho_corasick::AhoCorasick::builder()
            .match_kind(aho_corasick::MatchKind::LeftmostFirst)
            .build(&prefixes)
            .expect("token prefixes compile");
        Redactor {
            prefilter: prefilter::Prefilter::new(),
            set,
            detectors,
            pending,
            prefixes,
            prefix_scan,
        }
    }

    /// The detectors' names, in table order.
    #[cfg(test)]
    pub(crate) fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.detectors.iter().map(|(n, _, _)| *n)
    }

    /// `text` with every credential replaced by its marker, and the number
    /// of markers inserted. Borrowed (and 0) when nothing matched.
    pub(crate) fn redact_str<'a>(&self, text: &'a str) -> (Cow<'a, str>, u32) {
        if !self.prefilter.candidate(text) {
            return (Cow::Borrowed(text), 0);
        }
        let hits = self.set.matches(text);
        if !hits.matched_any() {
            return (Cow::Borrowed(text), 0);
        }
        let mut out = Cow::Borrowed(text);
        let mut count = 0u32;
        for i in hits.iter() {
            let (_, re, marker) = &self.detectors[i];
            let mut n = 0u32;
            let replaced = re.replace_all(&out, |c: &regex::Captures<'_>| {
                n += 1;
                let whole = c.get(0).expect("group 0");
                match c.name("s") {
                    Some(s) => {
                        let w = whole.as_str();
                        let (from, to) = (s.start() - whole.start(), s.end() - whole.start());
                        format!("{}{marker}{}", &w[..from], &w[to..])
                    }
                    None => marker.clone(),
                }
            });
            if n > 0 {
                out = Cow::Owned(replaced.into_owned());
                count += n;
            }
        }
        (out, count)
    }

    /// Redacts every string in `value` except id fields, in place; returns
    /// the number of markers inserted.
    pub(crate) fn redact_value(&self, value: &mut Value) -> u32 {
        match value {
            Value::String(s) => {
                let (out, n) = self.redact_str(s);
                if n > 0 {
                    *s = out.into_owned();
                }
                n
            }
            Value::Array(items) => items.iter_mut().map(|v| self.redact_value(v)).sum(),
            Value::Object(map) => map
                .iter_mut()
                .map(|(k, v)| {
                    if is_id_key(k) {
                        self.omit_id(v)
                    } else {
                        self.redact_value(v)
                    }
                })
                .sum(),
            _ => 0,
        }
    }

    /// An id field is structure and is never partly rewritten; but an id
    /// that carries a credential is replaced whole with [`OMITTED_ID`]
    /// (an omission, never a misleading or secret-bearing identity).
    /// Returns 1 when it was. Ids nested in arrays are handled alike.
    fn omit_id(&self, value: &mut Value) -> u32 {
        match value {
            Value::String(s) if self.redact_str(s).1 > 0 => {
                *s = OMITTED_ID.to_owned();
                1
            }
            Value::Array(items) => items.iter_mut().map(|v| self.omit_id(v)).sum(),
            Value::Object(_) => self.redact_value(value),
            _ => 0,
        }
    }

    /// Byte ranges of every detector match in `text`.
    pub(crate) fn match_spans(&self, text: &str) -> Vec<(usize, usize)> {
        if !self.prefilter.candidate(text) {
            return Vec::new();
        }
        let hits = self.set.matches(text);
        hits.iter()
            .flat_map(|i| {
                self.detectors[i]
                    .1
                    .find_iter(text)
                    .map(|m| (m.start(), m.end()))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
