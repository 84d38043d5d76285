//! Agent stderr, redacted line by line before it is logged.
//!
//! What must stay true: the body lines of a PEM private-key block are never
//! returned (its header and footer become one marker each), and every other
//! line passes through the same detectors as journal payloads.

use std::borrow::Cow;

use super::redactor;

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
