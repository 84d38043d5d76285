//! Holding streamed text back while its tail could still become a secret
//! (see "Whole logical blocks" in the module docs of `redact`).
//!
//! What must stay true: no cut falls inside a detector's match; a chunk is
//! released only at a boundary no match crosses, and chunks are merged only
//! where one does; the hold never exceeds [`MAX_HOLD_BYTES`], past which
//! text is released redacted as it stands.

use super::{MAX_HOLD_BYTES, Redactor, redactor};

/// Literal starts of token formats and assignment keys: a chunk whose last
/// word contains one of these, or ends in a start of one, is held back
/// (compared ASCII-case-insensitively: holding too much only delays).
pub(super) const TOKEN_PREFIXES: &[&str] = &[
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

impl Redactor {
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
