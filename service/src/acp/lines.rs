//! A newline-delimited reader with a hard bound on line length.
//!
//! An agent that writes an oversized line must cost the controller at most
//! `max` bytes of memory and end the turn as a protocol failure; it must never
//! crash the connection handling or grow a buffer without limit. Lines are
//! split by the same [`take_line`] as the controller's own frames; only the
//! end of input differs (an agent's last unterminated line is still a line).

use lapis_protocol::take_line;
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// Why no further line can be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LineError {
    /// A line exceeded the bound; the stream is no longer usable.
    #[error("line longer than {max} bytes")]
    TooLong { max: usize },
    /// The underlying read failed.
    #[error("read failed: {0}")]
    Io(#[from] std::io::Error),
}

/// Reads `\n`-terminated lines of at most `max` bytes (terminator excluded).
#[derive(Debug)]
pub(crate) struct BoundedLines<R> {
    /// The byte source.
    reader: R,
    /// Longest accepted line.
    max: usize,
    /// The line being assembled; kept across calls so a cancelled read loses
    /// nothing.
    buf: Vec<u8>,
}

impl<R: AsyncBufRead + Unpin> BoundedLines<R> {
    /// Wraps `reader`.
    pub(crate) fn new(reader: R, max: usize) -> BoundedLines<R> {
        BoundedLines {
            reader,
            max,
            buf: Vec::new(),
        }
    }

    /// The underlying reader (a partly assembled line is discarded).
    pub(crate) fn into_inner(self) -> R {
        self.reader
    }

    /// The next line without its terminator (and without a trailing `\r`),
    /// `Ok(None)` at end of input. A final unterminated line is returned.
    pub(crate) async fn next_line(&mut self) -> Result<Option<Vec<u8>>, LineError> {
        loop {
            let available = self.reader.fill_buf().await?;
            if available.is_empty() {
                if self.buf.is_empty() {
                    return Ok(None);
                }
                let mut line = std::mem::take(&mut self.buf);
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                if line.len() > self.max {
                    return Err(LineError::TooLong { max: self.max });
                }
                return Ok(Some(line));
            }
            let (used, done) = take_line(&mut self.buf, available, self.max)
                .map_err(|_| LineError::TooLong { max: self.max })?;
            self.reader.consume(used);
            if done {
                return Ok(Some(std::mem::take(&mut self.buf)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &'static [u8], max: usize) -> Vec<Result<Vec<u8>, String>> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            // A tiny buffer forces lines to span many reads.
            let mut r = BoundedLines::new(tokio::io::BufReader::with_capacity(3, input), max);
            let mut out = Vec::new();
            loop {
                match r.next_line().await {
                    Ok(Some(l)) => out.push(Ok(l)),
                    Ok(None) => break,
                    Err(e) => {
                        out.push(Err(e.to_string()));
                        break;
                    }
                }
            }
            out
        })
    }

    #[test]
    fn splits_lines_across_reads_and_strips_cr() {
        let got = lines(b"abc\r\n\nlonger line\ntail", 16);
        let want: Vec<Result<Vec<u8>, String>> = vec![
            Ok(b"abc".to_vec()),
            Ok(b"".to_vec()),
            Ok(b"longer line".to_vec()),
            Ok(b"tail".to_vec()),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn oversized_line_is_an_error_not_a_crash() {
        let got = lines(b"ok\n0123456789abcdef0\nnever\n", 16);
        assert_eq!(got[0], Ok(b"ok".to_vec()));
        assert_eq!(got[1], Err("line longer than 16 bytes".to_string()));
        assert_eq!(got.len(), 2);
        // Exactly at the bound is fine.
        assert_eq!(
            lines(b"0123456789abcdef\n", 16)[0].as_ref().unwrap().len(),
            16
        );
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever the input and chunking, no line longer than the bound is
        /// ever returned, and lines within it come back intact.
        #[test]
        fn never_returns_a_line_over_the_bound(
            data in proptest::collection::vec(prop_oneof![Just(b'\n'), Just(b'\r'), any::<u8>()], 0..512),
            max in 1usize..64,
            cap in 1usize..16,
        ) {
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let got = rt.block_on(async {
                let mut r = BoundedLines::new(tokio::io::BufReader::with_capacity(cap, &data[..]), max);
                let mut out = Vec::new();
                while let Ok(Some(line)) = r.next_line().await {
                    out.push(line);
                }
                out
            });
            let mut expected = Vec::new();
            let pieces: Vec<&[u8]> = data.split(|b| *b == b'\n').collect();
            for (i, piece) in pieces.iter().enumerate() {
                // The piece after the last `\n` is a line only if non-empty.
                if i + 1 == pieces.len() && piece.is_empty() {
                    break;
                }
                let mut p = piece.to_vec();
                if p.last() == Some(&b'\r') {
                    p.pop();
                }
                if p.len() > max {
                    break;
                }
                expected.push(p);
            }
            for line in &got {
                prop_assert!(line.len() <= max);
            }
            prop_assert_eq!(got, expected);
        }
    }
}
