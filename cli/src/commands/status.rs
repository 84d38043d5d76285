//! `status [--json]`: the running controller's identity and counters. Exit 3
//! with a clear message when nothing answers on the socket.

use crate::args::{GlobalArgs, JsonArg};
use crate::exit::CliResult;

pub fn run(global: &GlobalArgs, out: JsonArg) -> CliResult {
    let mut client = super::connect::connect(global)?;
    let s = client.status().map_err(super::connect::client_error)?;
    if out.json {
        crate::output::json(&s)?;
        return Ok(());
    }
    let list = |v: &[String]| {
        if v.is_empty() {
            "none".to_owned()
        } else {
            v.join(", ")
        }
    };
    let build = |key: &str| {
        s.build
            .get(key)
            .and_then(serde_json::Value::as_str)
            .unwrap_or("?")
            .to_owned()
    };
    crate::output::line(format!(
        "{} running, protocol {}\nversion   {} ({} {} {})\nsnapshot  {}\npid       {}\nuptime    {} s\nqueue     {}/{}\nrunning   {}\nfenced    {}",
        lapis_release::PRODUCT,
        s.protocol,
        s.version,
        build("commit"),
        build("date"),
        build("target"),
        s.snapshot
            .as_deref()
            .unwrap_or("none (not running from an installed snapshot)"),
        s.pid,
        s.uptime_seconds,
        s.queue.depth,
        s.queue.capacity,
        list(&s.running_workspaces),
        list(&s.fenced_workspaces),
    ))?;
    if let Some(a) = &s.agents {
        crate::output::line(format!(
            "turns     {}/{} running\nagents    {}/{} live ({} idle)",
            a.running_turns, a.max_running_turns, a.live, a.max_live, a.idle
        ))?;
    }
    Ok(())
}
