//! The server's async frame reader: the same bound and splitting rule as the
//! blocking reader in `lapis-protocol` ([`take_line`]), driven by tokio.

use lapis_protocol::{FrameError, take_line};
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// Reads the next frame into `buf` (cleared first). `Ok(false)` is a clean
/// end of stream between frames.
pub(super) async fn read_frame<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> Result<bool, FrameError> {
    buf.clear();
    loop {
        let chunk = reader.fill_buf().await?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn oversized_line_stops_without_reading_it_all() {
        // An endless line: the reader must give up after the bound.
        let (mut tx, rx) = tokio::io::duplex(64);
        let writer = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            let block = [b'x'; 64];
            // Stops when the reader drops its end.
            while tx.write_all(&block).await.is_ok() {}
        });
        let mut reader = tokio::io::BufReader::with_capacity(16, rx);
        let mut buf = Vec::new();
        let err = read_frame(&mut reader, &mut buf, 1000).await.unwrap_err();
        assert!(matches!(err, FrameError::TooLong { max: 1000 }));
        assert!(buf.len() <= 1001);
        drop(reader);
        writer.await.unwrap();
    }
}
