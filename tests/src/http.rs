//! [`HttpServer`]: a tiny HTTP/1.1 server on 127.0.0.1 for download tests.
//!
//! Serves fixed routes (path without the query string → [`Route`]) one
//! connection at a time, closing each after one response. A route can cut the
//! connection after part of its body to simulate a dropped download. Every
//! request is recorded (path and whether it carried an `Authorization`
//! header — never the header's value) so tests can assert what was asked.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// One canned response.
#[derive(Clone, Debug)]
pub struct Route {
    /// HTTP status code.
    pub(crate) status: u16,
    /// `Content-Type`.
    pub(crate) content_type: String,
    /// The full body (its length is the advertised `Content-Length`).
    pub(crate) body: Vec<u8>,
    /// Send only this many body bytes, then drop the connection.
    pub(crate) cut_after: Option<usize>,
    /// Advertise this `Content-Length` instead of the body's length (a
    /// server that lies, or announces more than anyone should accept).
    pub(crate) declared: Option<u64>,
}

impl Route {
    /// `200` with a body.
    pub fn ok(content_type: &str, body: impl Into<Vec<u8>>) -> Route {
        Route {
            status: 200,
            content_type: content_type.to_owned(),
            body: body.into(),
            cut_after: None,
            declared: None,
        }
    }

    /// `200` that advertises `declared` bytes and sends `body` (then closes).
    pub fn declaring(declared: u64, body: impl Into<Vec<u8>>) -> Route {
        Route {
            declared: Some(declared),
            ..Route::ok("application/octet-stream", body)
        }
    }

    /// `200` that advertises the whole body but sends only `n` bytes.
    pub fn cut(body: impl Into<Vec<u8>>, n: usize) -> Route {
        Route {
            cut_after: Some(n),
            ..Route::ok("application/octet-stream", body)
        }
    }
}

/// A request the server saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    /// Request path, without the query string.
    pub path: String,
    /// Whether an `Authorization` header was present.
    pub authorized: bool,
}

type Routes = Arc<Mutex<HashMap<String, Route>>>;

/// The server; stops when dropped.
#[derive(Debug)]
pub struct HttpServer {
    /// `http://127.0.0.1:<port>`.
    base: String,
    /// Path → response, shared with the serving thread.
    routes: Routes,
    /// Requests seen, in order.
    seen: Arc<Mutex<Vec<Seen>>>,
    /// Set on drop; the thread checks it after each accept.
    stop: Arc<AtomicBool>,
    /// The serving thread.
    thread: Option<JoinHandle<()>>,
}

impl Default for HttpServer {
    fn default() -> Self {
        Self::start()
    }
}

impl HttpServer {
    /// Binds 127.0.0.1 on a free port and starts serving.
    pub fn start() -> HttpServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let base = format!("http://{}", listener.local_addr().expect("local addr"));
        let routes: Routes = Arc::default();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (routes, seen, stop) = (routes.clone(), seen.clone(), stop.clone());
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Ok(stream) = stream {
                        let _ = serve(stream, &routes, &seen);
                    }
                }
            })
        };
        HttpServer {
            base,
            routes,
            seen,
            stop,
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The full URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Sets (or replaces) the response for `path`.
    pub fn route(&self, path: &str, route: Route) {
        self.routes.lock().unwrap().insert(path.to_owned(), route);
    }

    /// Requests seen so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = TcpStream::connect(self.base.trim_start_matches("http://"));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve(stream: TcpStream, routes: &Routes, seen: &Mutex<Vec<Seen>>) -> std::io::Result<()> {
    stream.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let target = request_line.split_whitespace().nth(1).unwrap_or("/");
    let path = target.split('?').next().unwrap_or("/").to_owned();
    let mut authorized = false;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" || line == "\n" {
            break;
        }
        if line.to_ascii_lowercase().starts_with("authorization:") {
            authorized = true;
        }
    }
    seen.lock().unwrap().push(Seen {
        path: path.clone(),
        authorized,
    });
    let route = routes.lock().unwrap().get(&path).cloned().unwrap_or(Route {
        status: 404,
        content_type: "application/json".into(),
        body: br#"{"message":"Not Found"}"#.to_vec(),
        cut_after: None,
        declared: None,
    });
    let mut out = stream;
    write!(
        out,
        "HTTP/1.1 {} X\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        route.status,
        route.content_type,
        route.declared.unwrap_or(route.body.len() as u64)
    )?;
    let sent = route
        .cut_after
        .unwrap_or(route.body.len())
        .min(route.body.len());
    out.write_all(&route.body[..sent])?;
    out.flush()?;
    out.shutdown(Shutdown::Both)
}
