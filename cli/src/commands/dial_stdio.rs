//! `dial-stdio`: this host's controller socket on stdin/stdout, for
//! `--host ssh://` on another machine (the way `docker system dial-stdio`
//! serves `docker -H ssh://`).
//!
//! What must stay true: the token never leaves this host. The first frame
//! on stdin must be `hello`; its credential fields are dropped and this
//! host's first token is put in (the application the caller named is
//! kept, default `lapis-cli`); the answer goes back without any `bearer`.
//! Everything after is relayed byte for byte, both ways, and the command
//! exits when either side closes. Nothing is printed but the relayed
//! frames and, on failure, an error on stderr (exit 3: no controller).

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;

use serde_json::Value;

use crate::args::GlobalArgs;
use crate::exit::{CliError, CliResult};

pub(super) fn run(global: &GlobalArgs) -> CliResult {
    // `--host`, its environment variable and the context in use never
    // apply here: a `dial-stdio` that dialled on would loop.
    let target = super::connect::local_client_target(global)?;
    let socket = target.home.join(lapis_protocol::home::SOCKET_FILE);
    let max = target.config.server.max_frame_bytes;
    let stream = UnixStream::connect(&socket).map_err(|e| {
        CliError::unavailable(
            "unavailable",
            anyhow::Error::new(e).context(format!(
                "no controller answers on {}; {}",
                socket.display(),
                super::connect::start_hint(&target.paths)
            )),
        )
    })?;
    let mut stdin = BufReader::new(std::io::stdin());
    let first = read_frame(&mut stdin, max)?;
    let hello = authenticated_hello(&first, &target.config.primary_token().secret)?;
    let mut to_server = stream.try_clone()?;
    let mut from_server = BufReader::new(stream.try_clone()?);
    to_server.write_all(&hello)?;
    let answer = read_frame(&mut from_server, max)?;
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(&without_bearer(&answer))?;
    stdout.flush()?;
    drop(stdout);

    let (done, wait) = std::sync::mpsc::channel::<()>();
    let up = done.clone();
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut stdin, &mut to_server);
        let _ = to_server.shutdown(std::net::Shutdown::Write);
        let _ = up.send(());
    });
    std::thread::spawn(move || {
        let mut out = std::io::stdout();
        let mut buf = [0u8; 16 * 1024];
        // Not `io::copy`: each read is flushed at once (a notification
        // must not wait in a buffer).
        while let Ok(n) = from_server.read(&mut buf) {
            if n == 0 || out.write_all(&buf[..n]).is_err() || out.flush().is_err() {
                break;
            }
        }
        let _ = done.send(());
    });
    // Either side closing ends the relay.
    let _ = wait.recv();
    Ok(())
}

/// One newline-terminated frame, at most `max` bytes.
fn read_frame(reader: &mut impl BufRead, max: usize) -> Result<Vec<u8>, CliError> {
    let mut frame = Vec::new();
    reader.take(max as u64 + 1).read_until(b'\n', &mut frame)?;
    if frame.is_empty() {
        return Err(CliError::failure(
            "disconnected",
            anyhow::anyhow!("the connection closed before `hello`"),
        ));
    }
    if !frame.ends_with(b"\n") {
        return Err(CliError::failure(
            "invalid_request",
            anyhow::anyhow!("the first frame is not a complete line within {max} bytes"),
        ));
    }
    Ok(frame)
}

/// The caller's `hello` with this host's token in place of any
/// credential it carried.
fn authenticated_hello(frame: &[u8], token: &str) -> Result<Vec<u8>, CliError> {
    let refuse = |why: &str| {
        CliError::failure(
            "invalid_request",
            anyhow::anyhow!("dial-stdio: {why}; the first frame must be `hello`"),
        )
    };
    let mut doc: Value = serde_json::from_slice(frame).map_err(|_| refuse("not JSON"))?;
    if doc.get("method").and_then(Value::as_str) != Some("hello") {
        return Err(refuse("another method came first"));
    }
    let params = doc.get("params").cloned().unwrap_or(Value::Null);
    let protocol = params.get("protocol").cloned().unwrap_or(Value::Null);
    let application = params
        .get("application")
        .and_then(Value::as_str)
        .unwrap_or(super::connect::APPLICATION)
        .to_owned();
    doc["params"] = serde_json::json!({
        "protocol": protocol,
        "token": token,
        "application": application,
    });
    let mut out = serde_json::to_vec(&doc).map_err(anyhow::Error::new)?;
    out.push(b'\n');
    Ok(out)
}

/// The answer to `hello` without a bearer (a secret that would outlive
/// the connection on the other host).
fn without_bearer(frame: &[u8]) -> Vec<u8> {
    match serde_json::from_slice::<Value>(frame) {
        Ok(mut doc) => {
            if let Some(result) = doc.get_mut("result").and_then(Value::as_object_mut) {
                result.remove("bearer");
            }
            let mut out = serde_json::to_vec(&doc).unwrap_or_default();
            out.push(b'\n');
            out
        }
        // Not JSON: relayed as it is, for the caller to refuse.
        Err(_) => frame.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hello_gets_this_hosts_token_and_the_answer_loses_its_bearer() {
        let hello = br#"{"jsonrpc":"2.0","id":1,"method":"hello","params":{"protocol":"p/1","application":"app","token":"theirs","bearer":"b"}}
"#;
        let out: Value =
            serde_json::from_slice(&authenticated_hello(hello, "mine").unwrap()).unwrap();
        assert_eq!(
            out["params"],
            serde_json::json!({"protocol": "p/1", "token": "mine", "application": "app"})
        );
        assert!(authenticated_hello(br#"{"id":1,"method":"status"}"#, "t").is_err());
        let answer = br#"{"jsonrpc":"2.0","id":1,"result":{"bearer":"secret","session":{}}}"#;
        let out = String::from_utf8(without_bearer(answer)).unwrap();
        assert!(!out.contains("secret") && out.ends_with('\n'), "{out}");
    }
}
