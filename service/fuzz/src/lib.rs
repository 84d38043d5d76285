//! What the fuzz targets exercise, as plain functions so they also compile
//! (and run in unit tests) without libFuzzer.
//!
//! Invariants checked on every input: the frame reader never yields a frame
//! over the bound and never panics; request parsing never panics; `hello`
//! never panics and no error it returns repeats the credential it was given.

pub mod config;

use std::io::BufReader;
use std::sync::Arc;

use lapis_service::auth::{Authority, ManualClock, MemorySessions};
use lapis_protocol::config::TokenSpec;
use lapis_protocol::{
    HelloParams, Incoming, Method, PROTOCOL, Request, read_frame_blocking,
};

/// The bound the target uses (small, so oversized lines are common).
pub const MAX: usize = 512;

const SECRET: &str = "lapis_00000000000000000000000000000000000000000000000000000000000000f5";

/// Splits `data` into frames and runs each through the request parser and,
/// for `hello`, through authentication.
pub fn frames_and_hello(data: &[u8]) {
    let authority = Authority::new(
        vec![TokenSpec {
            name: "owner".into(),
            principal: "owner".into(),
            secret: SECRET.into(),
            scopes: None,
            applications: None,
            workspaces: None,
            providers: None,
        }],
        60,
        Arc::new(ManualClock::new(1_000)),
        Arc::new(MemorySessions::new(Arc::new(ManualClock::new(1_000)))),
    );
    // A small read buffer makes frames straddle reads.
    let mut reader = BufReader::with_capacity(7, data);
    let mut buf = Vec::new();
    while let Ok(true) = read_frame_blocking(&mut reader, &mut buf, MAX) {
        assert!(buf.len() <= MAX, "frame over the bound");
        let _ = Incoming::parse(&buf);
        let Ok(request) = Request::parse(&buf) else {
            continue;
        };
        if Method::parse(&request.method) != Some(Method::Hello) {
            continue;
        }
        let Ok(params) = request.params::<HelloParams>() else {
            continue;
        };
        if params.protocol != PROTOCOL {
            continue;
        }
        if let Err(e) = authority.hello(&params) {
            for secret in [params.token.as_deref(), params.bearer.as_deref()]
                .into_iter()
                .flatten()
            {
                if secret.len() >= 8 {
                    assert!(
                        !e.message.contains(secret),
                        "an error repeated the credential"
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_do_not_panic() {
        let hello = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"hello\",\"params\":{{\"protocol\":\"{PROTOCOL}\",\"token\":\"{SECRET}\",\"application\":\"a\"}}}}\n"
        );
        for seed in [
            hello.as_bytes(),
            b"\xff\xfe\n\n{}\n[1]\n",
            &[b'x'; 2000][..],
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"hello\",\"params\":{\"protocol\":\"lapis-ai-controller/1\",\"bearer\":\"lapis_s_guess\"}}\n",
        ] {
            frames_and_hello(seed);
        }
    }
}
