//! The README's quickstart, run as written: its `sh` code blocks are read out
//! of README.md at test time, so an edit there that breaks the path from
//! install to a first answer fails here.
//!
//! The lines run in one bash process (so `export` and `cd` carry over), each
//! followed by a marker with its exit code, in a temp HOME whose service the
//! recording systemctl stand-in starts as systemd would. Two kinds of line are
//! skipped, and only these: `cargo build` (the suite has built the binary; a
//! checkout's `target/release/` links to it) and `npm install` (tests have no
//! network).

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use lapis_e2e::TestContext;

use crate::install_support::{stop_started, use_systemctl_standin};

/// Lines of the quickstart the test does not run, by prefix.
const SKIPPED: [&str; 2] = ["cargo build", "npm install"];

/// Marker printed on stderr after each quickstart line: `<marker> <line> <code>`.
const MARKER: &str = "quickstart-exit";

/// The `sh` code blocks of the README's `## Quickstart` section, in order.
fn quickstart_blocks(readme: &str) -> Vec<Vec<String>> {
    sh_blocks(readme, "## Quickstart")
}

/// The `sh` code blocks of a markdown file's section `heading` (a level-2
/// heading, up to the next one), in order.
pub(crate) fn sh_blocks(markdown: &str, heading: &str) -> Vec<Vec<String>> {
    let start = markdown
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("no `{heading}` section"));
    let section = &markdown[start + 1..];
    let section = match section[1..].find("\n## ") {
        Some(end) => &section[..end + 1],
        None => section,
    };
    let mut blocks = Vec::new();
    let mut current: Option<Vec<String>> = None;
    for line in section.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```sh") => current = Some(Vec::new()),
            (Some(_), "```") => blocks.push(current.take().unwrap()),
            (Some(block), text) => block.push(text.to_owned()),
            (None, _) => {}
        }
    }
    assert!(
        current.is_none(),
        "unterminated code block in the quickstart"
    );
    blocks
}

/// Kills the service the stand-in started, also when an assertion fails.
pub(crate) struct StopService(pub(crate) PathBuf);

impl Drop for StopService {
    fn drop(&mut self) {
        stop_started(&self.0);
    }
}

/// Whether `name` resolves on this test's PATH (then the agent is really
/// installed and the quickstart's real-agent turn is not predictable here).
fn on_path(name: &str) -> bool {
    std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).any(|dir| dir.join(name).is_file()))
        .unwrap_or(false)
}

#[test]
fn quickstart_runs_as_written_with_the_echo_agent() {
    let readme_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md");
    let readme = fs::read_to_string(&readme_path).expect("read README.md");
    let blocks = quickstart_blocks(&readme);
    assert_eq!(
        blocks.len(),
        2,
        "the quickstart has a first-answer block and a real-agent block"
    );

    let mut ctx = TestContext::new();
    let log = use_systemctl_standin(&mut ctx);
    let _stop = StopService(log);

    // A checkout whose `cargo build --release` has run: its binary is the one
    // the suite built.
    let checkout = ctx.home().join("checkout");
    fs::create_dir_all(checkout.join("target/release")).unwrap();
    symlink(
        TestContext::bin(),
        checkout.join("target/release/lapis-ai-controller"),
    )
    .unwrap();

    let lines: Vec<&String> = blocks
        .iter()
        .flatten()
        .filter(|line| !line.trim().is_empty() && !line.trim_start().starts_with('#'))
        .collect();
    let ran: Vec<&str> = lines
        .iter()
        .map(|line| line.as_str())
        .filter(|line| !SKIPPED.iter().any(|p| line.trim_start().starts_with(p)))
        .collect();
    assert!(
        lines.len() > ran.len(),
        "the quickstart still builds (`cargo build`) before installing"
    );
    let last = *ran.last().unwrap();
    assert!(
        last.contains("ask --provider claude"),
        "the quickstart ends with an ask of the real agent: `{last}`"
    );
    // With the adapter really installed the last line would reach a real
    // agent (and the network): it is left out then.
    let real_agent = on_path("claude-agent-acp");
    let run_count = if real_agent { ran.len() - 1 } else { ran.len() };
    let mut script = String::new();
    for (index, line) in ran[..run_count].iter().enumerate() {
        // A brace group runs in this shell, so `cd` and `export` persist.
        script.push_str(&format!(
            "{{ {line}\n}}; echo \"{MARKER} {index} $?\" >&2\n"
        ));
    }

    // `providers add … --secret NAME` reads the key from stdin.
    let secret_file = ctx.home().join("secret-input");
    fs::write(&secret_file, "sk-ant-quickstart-not-a-key\n").unwrap();
    let mut cmd = ctx.command_for(Path::new("bash"), ["-u", "-c", script.as_str()]);
    cmd.current_dir(&checkout)
        .stdin(fs::File::open(&secret_file).unwrap());
    let out = ctx.output(cmd);
    // The leak check at drop scans every file under HOME for the secret.
    fs::remove_file(&secret_file).unwrap();
    let context = format!("stdout:\n{}\nstderr:\n{}", out.stdout, out.stderr);

    let codes: Vec<(usize, i32)> = out
        .stderr
        .lines()
        .filter_map(|l| l.strip_prefix(MARKER))
        .map(|rest| {
            let mut parts = rest.split_whitespace();
            let index = parts.next().unwrap().parse().unwrap();
            let code = parts.next().unwrap().parse().unwrap();
            (index, code)
        })
        .collect();
    assert_eq!(codes.len(), run_count, "every line ran\n{context}");

    // The first answer, from the built-in echo agent.
    let first_block_lines = blocks[0]
        .iter()
        .filter(|l| ran.contains(&l.as_str()))
        .count();
    for &(index, code) in &codes[..first_block_lines] {
        assert_eq!(code, 0, "`{}` failed\n{context}", ran[index]);
    }
    assert!(
        out.stdout.lines().any(|l| l == "say hello"),
        "the echo agent's reply is on stdout\n{context}"
    );
    assert!(
        out.stderr.contains("registered workspace demo for ")
            && out.stderr.contains("completed (end_turn)"),
        "{context}"
    );

    // The real agent: the provider is added with its secret and `providers
    // add` makes the service reload it; the ask reaches the runner, which cannot find the adapter
    // `npm install` would have put on PATH.
    let (rest, last) = codes[first_block_lines..].split_at(ran.len() - first_block_lines - 1);
    for &(index, code) in rest {
        assert_eq!(code, 0, "`{}` failed\n{context}", ran[index]);
    }
    assert!(
        out.stdout
            .contains("the running service reloaded its configuration"),
        "{context}"
    );
    if real_agent {
        eprintln!("SKIPPED: claude-agent-acp is installed; a test does not ask a real agent");
    } else {
        assert_eq!(last, [(ran.len() - 1, 1)], "{context}");
        assert!(out.stderr.contains("(command_not_found)"), "{context}");
    }
}
