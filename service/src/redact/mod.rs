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
mod prefilter;

#[cfg(any(test, feature = "test-support"))]
pub use corpus::{Sample, sample_credentials};
#[cfg(test)]
use detectors::DETECTOR_SET_VERSION;

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::{Regex, RegexSet};
use serde_json::Value;

use detectors::DETECTORS;

/// What an id field (`id`, `*Id`, `*_id`, `*Ids`) that carries a detected
/// credential becomes: the whole value is omitted.
pub(crate) const OMITTED_ID: &str = "[OMITTED:id]";

/// The longest text held back from a stream while it could still become a
/// secret; beyond it the text is released (redacted as it stands).
pub(crate) const MAX_HOLD_BYTES: usize = 64 * 1024;

/// Literal starts of token formats and assignment keys: a chunk whose last
/// word contains one of these, or ends in a start of one, is held back
/// (compared ASCII-case-insensitively: holding too much only delays).
const TOKEN_PREFIXES: &[&str] = &[
    "-----BEGIN",
    "lapis_",
    "AKIA",
    "ASIA",
    "ABIA",
    "ACCA",
    "A3T",
    "AIza",
    "GOCSPX-",
    "ya29.",
    "AccountKey=",
    "dop_v1_",
    "doo_v1_",
    "dor_v1_",
    "AGE-SECRET-KEY-",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "glrt-",
    "gldt-",
    "ATBB",
    "ATATT3",
    "xox",
    "xapp-",
    "https://",
    "http://",
    "sk_live_",
    "sk_test_",
    "rk_live_",
    "rk_test_",
    "whsec_",
    "sq0",
    "shpat_",
    "SK",
    "SG.",
    "key-",
    "sk-",
    "hf_",
    "api_org_",
    "npm_",
    "pypi-",
    "lin_api_",
    "dapi",
    "dp.pt.",
    "eyJ",
    "gsk_",
    "xai-",
    "pplx-",
    "r8_",
    "hvs.",
    "hvb.",
    "hvr.",
    "glsa_",
    "glc_",
    "NRAK-",
    "PMAK-",
    "sbp_",
    "HRKU-",
    "client-key-data",
    "sig=",
    "\"auth\"",
    "authorization",
    "machine",
    "bearer",
    // Assignment keys (see the `secret-assignment` detector).
    "password",
    "passwd",
    "secret",
    "token",
    "api_key",
    "api-key",
    "apikey",
    "access_key",
    "private_key",
    "aws_",
];

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

    /// Where streamed `text` must be cut so that no secret can be split:
    /// `text[..cut]` may be sent now, `text[cut..]` must wait for more.
    /// Returns `text.len()` when nothing needs holding (see module docs).
    pub(crate) fn hold_from(&self, text: &str) -> usize {
        let len = text.len();
        let mut cut = len;
        // A match that reaches the end may continue in the next chunk.
        if self.prefilter.candidate(text) {
            for i in self.set.matches(text).iter() {
                for m in self.detectors[i].1.find_iter(text) {
                    if m.end() == len {
                        cut = cut.min(m.start());
                    }
                }
            }
        }
        // An unterminated PEM block.
        if let Some(begin) = text.rfind("-----BEGIN")
            && !text[begin..].contains("-----END")
        {
            cut = cut.min(begin);
        }
        if let Some(m) = self
            .pending
            .find(&text[len.saturating_sub(MAX_HOLD_BYTES)..])
        {
            cut = cut.min(len.saturating_sub(MAX_HOLD_BYTES) + m.start());
        }
        // The trailing run (no whitespace) if it starts with, or ends in a
        // fragment of, a known token prefix.
        let run_start = text
            .char_indices()
            .rev()
            .find(|(_, c)| c.is_whitespace())
            .map_or(0, |(i, c)| i + c.len_utf8());
        let run = text[run_start..].to_ascii_lowercase();
        if !run.is_empty() {
            // Leftmost: the earliest start of any prefix in the run.
            if let Some(m) = self.prefix_scan.find(&run) {
                cut = cut.min(run_start + m.start());
            }
            for p in &self.prefixes {
                for k in (1..p.len()).rev() {
                    if run.ends_with(&p[..k]) {
                        cut = cut.min(len - k);
                        break;
                    }
                }
            }
            // A long token-like run may be a format without a fixed prefix.
            let token_like = run
                .bytes()
                .rev()
                .take_while(|b| b.is_ascii_alphanumeric() || b"_.~+/=-".contains(b))
                .count();
            if token_like >= 16 {
                cut = cut.min(len - token_like);
            }
            // 14 token characters then a start of `.atlasv1.` may be a
            // Terraform Cloud token.
            const ATLAS: &str = ".atlasv1.";
            if let Some(k) = (1..=ATLAS.len())
                .rev()
                .find(|k| run.ends_with(&ATLAS[..*k]))
                && run.len() >= 14 + k
                && run.as_bytes()[run.len() - k - 14..run.len() - k]
                    .iter()
                    .all(u8::is_ascii_alphanumeric)
            {
                cut = cut.min(len - k - 14);
            }
            // A digit (then `Q`) may begin an Azure client secret's `8Q~`.
            let b = run.as_bytes();
            let azure = match b {
                [.., d] if d.is_ascii_digit() => 1,
                [.., d, b'q'] if d.is_ascii_digit() => 2,
                _ => 0,
            };
            // `scheme://user:password@` may be on its way.
            if run.contains(':') {
                cut = cut.min(run_start);
            }
            if let Some(i) = run.rfind("q~") {
                cut = cut.min(run_start + i.saturating_sub(4));
            }
            if azure > 0 {
                cut = cut.min(run_start + b.len().saturating_sub(azure + 3).min(b.len()));
            }
            // Digits then `:` may be a Telegram bot id.
            let tail = run.trim_start_matches(|c: char| !c.is_ascii_digit());
            if tail.len() >= 6 && tail.bytes().all(|b| b.is_ascii_digit() || b == b':') {
                cut = cut.min(len - tail.len());
            }
        }
        if len - cut > MAX_HOLD_BYTES {
            return len;
        }
        cut
    }
}

/// The hold-back of one text stream (see the module docs). Chunks keep
/// their boundaries: a chunk whose end could begin a secret waits for the
/// next one, and chunks are merged into one only when a detector's match
/// spans their boundary. `T` is the chunk's other data (the first chunk's is
/// kept on a merge).
#[derive(Debug)]
pub(crate) struct StreamHold<T> {
    /// Chunks received but not yet released, in order.
    held: Vec<(String, T)>,
}

impl<T> Default for StreamHold<T> {
    fn default() -> Self {
        StreamHold { held: Vec::new() }
    }
}

impl<T> StreamHold<T> {
    /// Whether nothing is held.
    pub(crate) fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Adds a chunk; returns the chunks that may be released now, in order.
    pub(crate) fn push(&mut self, text: String, data: T) -> Vec<(String, T)> {
        self.held.push((text, data));
        let joined: String = self.held.iter().map(|(t, _)| t.as_str()).collect();
        let r = redactor();
        let mut cut = r.hold_from(&joined);
        let spans = r.match_spans(&joined);
        // Never cut through a match.
        while let Some(m) = spans.iter().find(|(s, e)| *s < cut && cut < *e) {
            cut = m.0;
        }
        // Release the chunks that end at or before the cut, at a boundary no
        // match crosses.
        let mut end = 0;
        let mut release = 0;
        for (i, (t, _)) in self.held.iter().enumerate() {
            end += t.len();
            if end > cut {
                break;
            }
            if !spans.iter().any(|(s, e)| *s < end && end < *e) {
                release = i + 1;
            }
        }
        let rest = self.held.split_off(release);
        let out = std::mem::replace(&mut self.held, rest);
        merge_spanning(out, &spans)
    }

    /// Releases whatever is held (the stream ended).
    pub(crate) fn finish(&mut self) -> Vec<(String, T)> {
        let out = std::mem::take(&mut self.held);
        let joined: String = out.iter().map(|(t, _)| t.as_str()).collect();
        let spans = redactor().match_spans(&joined);
        merge_spanning(out, &spans)
    }
}

/// Merges consecutive chunks (which start at offset 0 of `spans`) where a
/// span crosses their boundary.
fn merge_spanning<T>(chunks: Vec<(String, T)>, spans: &[(usize, usize)]) -> Vec<(String, T)> {
    let mut out: Vec<(String, T)> = Vec::with_capacity(chunks.len());
    let mut offset = 0;
    for (text, data) in chunks {
        let crosses = offset > 0 && spans.iter().any(|(s, e)| *s < offset && offset < *e);
        offset += text.len();
        match out.last_mut() {
            Some((prev, _)) if crosses => prev.push_str(&text),
            _ => out.push((text, data)),
        }
    }
    out
}

/// Redacts an agent's stderr line by line, suppressing the lines inside a
/// PEM private-key block (its header and footer become one marker each).
#[derive(Debug, Default)]
pub(crate) struct StderrRedactor {
    /// Inside a `-----BEGIN … PRIVATE KEY-----` block.
    in_key: bool,
}

impl StderrRedactor {
    /// The line as it may be logged, or `None` to drop it.
    pub(crate) fn line<'a>(&mut self, line: &'a str) -> Option<Cow<'a, str>> {
        if self.in_key {
            if line.contains("-----END") && line.contains("PRIVATE KEY") {
                self.in_key = false;
                return Some(Cow::Borrowed("[REDACTED:private-key]"));
            }
            return None;
        }
        if line.contains("-----BEGIN") && line.contains("PRIVATE KEY") && !line.contains("-----END")
        {
            self.in_key = true;
        }
        Some(redactor().redact_str(line).0)
    }
}

#[cfg(test)]
mod tests;
