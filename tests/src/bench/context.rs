//! The cost of a context port: warm echo turns one at a time on a thread
//! that binds a context port, against the same turns on a thread that does
//! not, on one controller. The difference, less the application handler's
//! own time, is the `context.prepare` round trip (the request on the
//! application's connection, its answer, the budget's cut and the
//! `context_prepared` event) as one turn pays it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;
use lapis_protocol::client::{CallbackError, ContextHandler};
use lapis_protocol::context::{ContextBlock, ContextPrepare, ContextPrepared, ContextRegister};
use lapis_protocol::params::ThreadsCreate;
use serde_json::json;

use super::rig::Rig;
use super::table::{Table, Unit};
use super::warm::turn_latency;

/// Answers one small block and records how long it took.
struct Timed(Arc<Mutex<Vec<f64>>>);

impl ContextHandler for Timed {
    fn prepare(&mut self, call: &ContextPrepare) -> Result<ContextPrepared, CallbackError> {
        let started = Instant::now();
        let answer = ContextPrepared {
            blocks: vec![ContextBlock {
                id: "profile".into(),
                text: format!("context for {}", call.turn_id),
            }],
        };
        self.0
            .lock()
            .unwrap()
            .push(started.elapsed().as_secs_f64() * 1e3);
        Ok(answer)
    }
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    v[v.len() / 2]
}

pub(crate) fn run(table: &mut Table, n: usize) -> Result<()> {
    let mut rig = Rig::new(2, json!({}), json!({}))?;
    rig.start()?;
    let mut client = rig.client()?;
    let mut app = rig.client()?;
    app.context_register(ContextRegister {
        port: "bench".into(),
        deadline_ms: None,
    })?;
    let handler_ms: Arc<Mutex<Vec<f64>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let serving = {
        let (stop, mut handler) = (stop.clone(), Timed(handler_ms.clone()));
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                if app
                    .serve_context(&mut handler, Some(Duration::from_millis(50)))
                    .is_err()
                {
                    break;
                }
            }
        })
    };
    let create = |context: Option<&str>, ws: &str| {
        let mut p = ThreadsCreate::new(ws, "echo");
        p.ports.context = context.map(str::to_owned);
        p
    };
    let plain = client
        .threads_create_with(&create(None, &rig.workspaces[0]))?
        .thread;
    let ported = client
        .threads_create_with(&create(Some("bench"), &rig.workspaces[1]))?
        .thread;
    let base_name = "warm echo turn, no context port: submit -> completed event";
    // Interleaved rounds, so load drifts hit both alike.
    let (mut base, mut with) = (Vec::new(), Vec::new());
    for round in 0..4 {
        base.extend(turn_latency(
            &mut client,
            &plain.id,
            &format!("ctx-base-{round}"),
            n / 4,
        )?);
        with.extend(turn_latency(
            &mut client,
            &ported.id,
            &format!("ctx-port-{round}"),
            n / 4,
        )?);
    }
    stop.store(true, Ordering::SeqCst);
    let _ = serving.join();
    let handler = handler_ms.lock().unwrap().clone();
    let overhead = median(&with) - median(&base) - median(&handler);
    table.add("context", base_name, Unit::Ms, base, None);
    table.add(
        "context",
        "warm echo turn with a context port (one block): submit -> completed event",
        Unit::Ms,
        with,
        Some(base_name),
    );
    table.add(
        "context",
        "the application's own context.prepare handler time",
        Unit::Ms,
        handler,
        None,
    );
    table.note(format!(
        "context.prepare round trip over the handler's own time (median with − median without − median handler): {overhead:.3} ms (goal ≤ 1 ms)"
    ));
    Ok(())
}
