//! [`WebhookServer`]: a recording stand-in for a webhook receiver (ntfy,
//! Slack, Discord or any JSON endpoint) on 127.0.0.1, over HTTPS (rustls,
//! with the test certificate in `tests/fixtures/tls`) or plain HTTP.
//!
//! Every request is recorded whole — method, path, headers, body — so a
//! test can assert exactly what left the controller; each is answered with
//! the next scripted status (then `200`) and the connection closed.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// One recorded request.
#[derive(Clone, Debug)]
pub struct Request {
    /// `POST`, …
    pub method: String,
    /// The request target.
    pub path: String,
    /// Headers, names lowercased, in arrival order.
    pub headers: Vec<(String, String)>,
    /// The body (`Content-Length` bytes).
    pub body: Vec<u8>,
}

impl Request {
    /// The first header named `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The whole request as text (for "never contains" scans).
    pub fn text(&self) -> String {
        let mut s = format!("{} {}\n", self.method, self.path);
        for (n, v) in &self.headers {
            s.push_str(&format!("{n}: {v}\n"));
        }
        s + &String::from_utf8_lossy(&self.body)
    }
}

/// The stand-in; it serves until the test process ends.
#[derive(Debug)]
pub struct WebhookServer {
    port: u16,
    tls: bool,
    requests: Arc<Mutex<Vec<Request>>>,
}

/// The test certificate (self-signed for 127.0.0.1 and localhost): the
/// controller trusts it through `notify.webhook.caFile`.
pub fn test_ca_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/tls/cert.pem")
}

impl WebhookServer {
    /// An HTTPS receiver answering `statuses` in turn, then `200`.
    pub fn https(statuses: &[u16]) -> WebhookServer {
        WebhookServer::start(true, statuses)
    }

    /// A plain-HTTP receiver (a self-hosted ntfy on loopback).
    pub fn http(statuses: &[u16]) -> WebhookServer {
        WebhookServer::start(false, statuses)
    }

    fn start(tls: bool, statuses: &[u16]) -> WebhookServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let config = tls.then(server_config);
        let script = Arc::new(Mutex::new(statuses.to_vec()));
        let seen = Arc::clone(&requests);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let status = {
                    let mut s = script.lock().unwrap();
                    if s.is_empty() { 200 } else { s.remove(0) }
                };
                let seen = Arc::clone(&seen);
                let config = config.clone();
                std::thread::spawn(move || {
                    let _ = serve_one(stream, config, status, &seen);
                });
            }
        });
        WebhookServer {
            port,
            tls,
            requests,
        }
    }

    /// The URL of `path` on this server.
    pub fn url(&self, path: &str) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}{path}", self.port)
    }

    /// What arrived so far.
    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }
}

fn server_config() -> Arc<rustls::ServerConfig> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/tls");
    let certs = vec![CertificateDer::from_pem_file(dir.join("cert.pem")).unwrap()];
    let key = PrivateKeyDer::from_pem_file(dir.join("key.pem")).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Arc::new(
        rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap(),
    )
}

fn serve_one(
    stream: TcpStream,
    tls: Option<Arc<rustls::ServerConfig>>,
    status: u16,
    seen: &Mutex<Vec<Request>>,
) -> std::io::Result<()> {
    stream.set_read_timeout(Some(std::time::Duration::from_secs(30)))?;
    match tls {
        Some(config) => {
            let conn = rustls::ServerConnection::new(config).map_err(std::io::Error::other)?;
            exchange(rustls::StreamOwned::new(conn, stream), status, seen)
        }
        None => exchange(stream, status, seen),
    }
}

fn exchange(
    mut stream: impl Read + Write,
    status: u16,
    seen: &Mutex<Vec<Request>>,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(&mut stream);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let path = parts.next().unwrap_or_default().to_owned();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h.trim_end().is_empty() {
            break;
        }
        if let Some((n, v)) = h.trim_end().split_once(':') {
            headers.push((n.trim().to_ascii_lowercase(), v.trim().to_owned()));
        }
    }
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    seen.lock().unwrap().push(Request {
        method,
        path,
        headers,
        body,
    });
    let reply = format!("HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    stream.write_all(reply.as_bytes())?;
    stream.flush()
}
