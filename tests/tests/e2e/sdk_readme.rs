//! The SDK README (`service/protocol/README.md`) followed literally after
//! the top README's quickstart: the quickstart's first block runs (install,
//! the service started by the systemctl stand-in, `ask` in `~/src/demo`),
//! then, in the same bash, every line of the SDK README's `## After the
//! quickstart` section as written. Both are read out of the files at test
//! time, so an edit that breaks the path fails here.
//!
//! Two substitutions, and only these: a `cargo build` line is skipped (the
//! suite has built the fixture agent; the checkout's `target/debug/` links
//! to it) and `cargo run -p lapis-protocol --example NAME --` runs the
//! example as the suite built it (`sdk-NAME`, the same source file: see
//! `tests/Cargo.toml`).

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

use lapis_e2e::TestContext;

use crate::install_support::use_systemctl_standin;
use crate::quickstart::{StopService, sh_blocks};

/// Marker printed on stderr after each line: `<marker> <index> <code>`.
const MARKER: &str = "sdk-readme-exit";

/// What `cargo run` of an example is replaced with, by example name.
fn example_bin(name: &str) -> &'static str {
    match name {
        "quickstart" => env!("CARGO_BIN_EXE_sdk-quickstart"),
        "tools_app" => env!("CARGO_BIN_EXE_sdk-tools-app"),
        other => panic!("the SDK README runs example `{other}`, which the suite does not build"),
    }
}

/// One README line as the test runs it (`None`: skipped).
fn as_run(line: &str) -> Option<String> {
    let trimmed = line.trim_start();
    if trimmed.starts_with("cargo build") {
        return None;
    }
    const RUN: &str = "cargo run -p lapis-protocol --example ";
    if let Some(rest) = trimmed.strip_prefix(RUN) {
        let (name, args) = rest
            .split_once(" -- ")
            .expect("`cargo run … --example NAME -- ARGS`");
        return Some(format!("'{}' {args}", example_bin(name)));
    }
    Some(line.to_owned())
}

fn code_lines(blocks: &[Vec<String>]) -> Vec<String> {
    blocks
        .iter()
        .flatten()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .cloned()
        .collect()
}

#[test]
fn the_sdk_readme_runs_as_written_after_the_quickstart() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let readme = fs::read_to_string(root.join("README.md")).unwrap();
    let sdk = fs::read_to_string(root.join("service/protocol/README.md")).unwrap();
    let quickstart = code_lines(&sh_blocks(&readme, "## Quickstart")[..1]);
    let after = code_lines(&sh_blocks(&sdk, "## After the quickstart"));
    assert!(
        after.iter().any(|l| l.contains("--example quickstart"))
            && after.iter().any(|l| l.contains("--example tools_app")),
        "the section runs both examples: {after:#?}"
    );

    let mut ctx = TestContext::new();
    let log = use_systemctl_standin(&mut ctx);
    let _stop = StopService(log);
    // A checkout whose `cargo build`s have run.
    let checkout = ctx.home().join("checkout");
    for (link, bin) in [
        ("target/release/lapis-ai-controller", TestContext::bin()),
        (
            "target/debug/fixture-agent",
            Path::new(env!("CARGO_BIN_EXE_fixture-agent")).to_owned(),
        ),
    ] {
        let link = checkout.join(link);
        fs::create_dir_all(link.parent().unwrap()).unwrap();
        symlink(&bin, link).unwrap();
    }

    let ran: Vec<String> = quickstart
        .iter()
        .chain(&after)
        .filter_map(|l| as_run(l))
        .collect();
    let mut script = String::new();
    for (index, line) in ran.iter().enumerate() {
        // A brace group runs in this shell, so `cd` and `export` persist.
        script.push_str(&format!(
            "{{ {line}\n}}; echo \"{MARKER} {index} $?\" >&2\n"
        ));
    }
    // The first example's failure on a workspace nobody registered reads
    // as a sentence with its code and what to do, not a Debug dump.
    script.push_str(&format!(
        "'{}' ~/.lapis/ai-controller/controller.sock \"$(lapis-ai-controller token show)\" proj hi; \
         echo \"{MARKER} unregistered $?\" >&2\n",
        example_bin("quickstart")
    ));
    let mut cmd = ctx.command_for(Path::new("bash"), ["-u", "-c", script.as_str()]);
    cmd.current_dir(&checkout);
    let out = ctx.output(cmd);
    let context = format!("stdout:\n{}\nstderr:\n{}", out.stdout, out.stderr);

    let codes: Vec<(&str, &str)> = out
        .stderr
        .lines()
        .filter_map(|l| l.strip_prefix(MARKER))
        .filter_map(|rest| rest.trim().split_once(' '))
        .collect();
    assert_eq!(codes.len(), ran.len() + 1, "every line ran\n{context}");
    for (index, code) in &codes[..ran.len()] {
        let line = &ran[index.parse::<usize>().unwrap()];
        assert_eq!(*code, "0", "`{line}` failed\n{context}");
    }
    // The quickstart example's echo reply, then the tool example's turn:
    // the keyless agent listed the tools, called the mutating one and read
    // its effect back through the application's handler.
    assert!(
        out.stdout.lines().any(|l| l == "hello from the SDK"),
        "{context}"
    );
    assert!(
        out.stdout.contains("tools: notes__list, notes__add\n")
            && out.stdout.contains("tool notes__add: added note 1\n")
            && out.stdout.contains("tool notes__list: buy milk\n"),
        "{context}"
    );
    assert!(out.stderr.contains(" completed\n"), "{context}");

    assert_eq!(codes[ran.len()], ("unregistered", "1"), "{context}");
    let failure = out
        .stderr
        .lines()
        .find(|l| l.starts_with("quickstart: "))
        .unwrap_or_else(|| panic!("the example says why it failed\n{context}"));
    assert!(
        failure.contains("[not_found]") && failure.contains("workspaces list"),
        "{failure}"
    );
    assert!(
        !out.stderr.contains("Rpc(") && !out.stderr.contains("Error: "),
        "{context}"
    );
}
