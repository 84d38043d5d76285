//! The chaos runner's suites (see `src/bin/chaos.rs`). Each is bounded in
//! iterations and time, stops by itself and returns a [`Summary`].

pub(crate) mod check;
pub(crate) mod hostile;
pub(crate) mod install_kill;
pub(crate) mod load;
pub(crate) mod serve_kill;

/// One suite's result line.
#[derive(Debug, Default)]
pub(crate) struct Summary {
    /// Suite name.
    pub(crate) suite: &'static str,
    /// Loop iterations run.
    pub(crate) iterations: usize,
    /// Faults actually injected (a kill that found the process alive).
    pub(crate) faults: usize,
    /// Invariant violations, each described (never with a secret).
    pub(crate) violations: Vec<String>,
    /// Extra figures for the line.
    pub(crate) detail: String,
}

impl Summary {
    /// The summary line.
    pub(crate) fn line(&self) -> String {
        format!(
            "chaos {}: iterations {}, faults injected {}, violations {}{}",
            self.suite,
            self.iterations,
            self.faults,
            self.violations.len(),
            if self.detail.is_empty() {
                String::new()
            } else {
                format!(" ({})", self.detail)
            }
        )
    }
}

/// A small xorshift generator; the seed is printed so a run can be repeated.
#[derive(Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    /// Seeded generator (0 is replaced).
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    /// Next value.
    pub(crate) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    /// Uniform in `0..n` (n > 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}
