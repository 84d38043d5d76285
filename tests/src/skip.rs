//! Skipping a test for a missing tool, honestly: outside CI the test says
//! `SKIPPED: …` and returns; under CI (`CI=true`, as GitHub Actions sets)
//! a missing tool fails the test, so a green CI run never hides a test
//! that did not run.

/// Whether this run is a CI run (`CI` set to `true` or `1`).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// A test cannot run because `why` (a tool is missing). Under CI this
/// panics; otherwise it prints `SKIPPED: <why>` for the caller to return.
pub fn skip(why: &str) {
    if in_ci() {
        panic!("{why}, and CI=true: this test must run in CI (install the tool)");
    }
    eprintln!("SKIPPED: {why} (it would fail under CI=true)");
}
