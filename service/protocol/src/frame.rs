//! Newline-delimited frames with a hard size bound.
//!
//! A frame is the bytes before a `\n` (a trailing `\r` is dropped). What must
//! stay true: a reader never holds more than `max` bytes of one frame in
//! memory. A line that grows past the bound is reported as
//! [`FrameError::TooLong`] as soon as the bound is crossed, without reading the
//! rest of it; the caller answers with an error and closes the connection,
//! since the stream position inside the oversized line is meaningless.

use std::io::{self, BufRead};

/// The default frame bound: 1 MiB.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 1024 * 1024;

/// Why no frame could be read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The line exceeded the bound.
    #[error("frame exceeds the {max}-byte limit")]
    TooLong {
        /// The bound in force.
        max: usize,
    },
    /// The stream ended in the middle of a line.
    #[error("stream ended inside a frame")]
    Truncated,
    /// The underlying stream failed.
    #[error("read failed")]
    Io(#[from] io::Error),
}

/// Appends `chunk` up to its first newline to `buf`. Returns how many bytes
/// of `chunk` were used and whether the frame is complete. The one
/// line-splitting rule: every bounded reader (blocking, async, agent stdout)
/// drives it over its buffered chunks.
pub fn take_line(buf: &mut Vec<u8>, chunk: &[u8], max: usize) -> Result<(usize, bool), FrameError> {
    match chunk.iter().position(|b| *b == b'\n') {
        Some(i) => {
            // `max + 1` leaves room for a `\r` that is stripped below.
            if buf.len() + i > max + 1 {
                return Err(FrameError::TooLong { max });
            }
            buf.extend_from_slice(&chunk[..i]);
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
            if buf.len() > max {
                return Err(FrameError::TooLong { max });
            }
            Ok((i + 1, true))
        }
        None => {
            // `max + 1` leaves room for a `\r` that the newline will strip.
            if buf.len() + chunk.len() > max + 1 {
                return Err(FrameError::TooLong { max });
            }
            buf.extend_from_slice(chunk);
            Ok((chunk.len(), false))
        }
    }
}

/// Reads the next frame into `buf` (cleared first). `Ok(false)` is a clean
/// end of stream between frames. The client SDK and the fuzz target use it;
/// the server's async reader drives the same [`take_line`].
pub fn read_frame_blocking<R: BufRead>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> Result<bool, FrameError> {
    buf.clear();
    continue_frame_blocking(reader, buf, max)
}

/// Like [`read_frame_blocking`] but keeps what `buf` already holds: after a
/// read timeout the caller calls again with the same `buf` and nothing of a
/// half-read frame is lost. The caller clears `buf` after a complete frame.
pub fn continue_frame_blocking<R: BufRead>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> Result<bool, FrameError> {
    loop {
        let chunk = match reader.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        };
        if chunk.is_empty() {
            return if buf.is_empty() {
                Ok(false)
            } else {
                Err(FrameError::Truncated)
            };
        }
        let (used, done) = take_line(buf, chunk, max)?;
        reader.consume(used);
        if done {
            return Ok(true);
        }
    }
}

/// Serializes one message as a frame (JSON + `\n`). serde_json never emits a
/// raw newline inside a document, so the framing cannot be broken by content.
pub fn encode<T: serde::Serialize>(message: &T) -> Vec<u8> {
    let mut out = serde_json::to_vec(message).unwrap_or_else(|_| {
        br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"encoding failed","data":{"code":"internal"}}}"#.to_vec()
    });
    out.push(b'\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn frames(input: &[u8], max: usize, chunk: usize) -> (Vec<Vec<u8>>, Option<String>) {
        let reader = io::BufReader::with_capacity(chunk.max(1), input);
        let mut reader = reader;
        let mut out = Vec::new();
        let mut buf = Vec::new();
        loop {
            match read_frame_blocking(&mut reader, &mut buf, max) {
                Ok(true) => out.push(buf.clone()),
                Ok(false) => return (out, None),
                Err(e) => return (out, Some(e.to_string())),
            }
        }
    }

    #[test]
    fn splits_lines_and_strips_cr() {
        let (f, err) = frames(b"a\r\nbc\n\n", 10, 2);
        assert_eq!(f, vec![b"a".to_vec(), b"bc".to_vec(), b"".to_vec()]);
        assert!(err.is_none());
    }

    #[test]
    fn exactly_max_is_accepted_one_more_is_not() {
        let (f, err) = frames(b"12345\n", 5, 3);
        assert_eq!(f, vec![b"12345".to_vec()]);
        assert!(err.is_none());
        let (f, err) = frames(b"123456\n", 5, 3);
        assert!(f.is_empty());
        assert!(err.unwrap().contains("limit"));
    }

    #[test]
    fn truncated_tail_is_an_error() {
        let (f, err) = frames(b"ok\npartial", 100, 4);
        assert_eq!(f, vec![b"ok".to_vec()]);
        assert!(err.unwrap().contains("ended"));
    }

    proptest! {
        #[test]
        fn any_chunking_gives_the_same_frames(
            lines in proptest::collection::vec(proptest::collection::vec(any::<u8>().prop_filter("no newline", |b| *b != b'\n' && *b != b'\r'), 0..20), 0..8),
            chunk in 1usize..7,
        ) {
            let mut input = Vec::new();
            for l in &lines { input.extend_from_slice(l); input.push(b'\n'); }
            let (got, err) = frames(&input, 32, chunk);
            prop_assert!(err.is_none());
            prop_assert_eq!(got, lines);
        }

        #[test]
        fn never_holds_more_than_the_bound(input in proptest::collection::vec(any::<u8>(), 0..300), max in 1usize..40) {
            let mut reader = io::BufReader::with_capacity(8, &input[..]);
            let mut buf = Vec::new();
            while let Ok(true) = read_frame_blocking(&mut reader, &mut buf, max) {
                prop_assert!(buf.len() <= max);
                prop_assert!(buf.capacity() < 4 * max + 64);
            }
        }
    }
}
