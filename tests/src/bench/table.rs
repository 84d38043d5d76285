//! The one table every suite adds rows to: median, min, max and the ratio
//! against a floor or peer row measured in the same run.

use std::time::{Duration, Instant};

/// Whether a larger value is better (throughput) or worse (time, memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unit {
    /// Milliseconds.
    Ms,
    /// Per second.
    PerSec(&'static str),
    /// Mebibytes.
    MiB,
    /// A count of something per operation (`commits`).
    Count(&'static str),
}

/// One measured figure.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    /// Suite name.
    pub(crate) suite: &'static str,
    /// What was measured.
    pub(crate) figure: String,
    /// Samples.
    pub(crate) samples: Vec<f64>,
    /// Unit.
    pub(crate) unit: Unit,
    /// The figure of the row this one is compared with, if any.
    pub(crate) against: Option<String>,
}

impl Row {
    /// Median, min, max.
    pub(crate) fn stats(&self) -> (f64, f64, f64) {
        let mut v = self.samples.clone();
        v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
        (v[v.len() / 2], v[0], v[v.len() - 1])
    }
}

/// All rows of one run.
#[derive(Debug, Default)]
pub(crate) struct Table {
    /// In insertion order.
    pub(crate) rows: Vec<Row>,
    /// Lines printed under the table (skips, notes).
    pub(crate) notes: Vec<String>,
}

impl Table {
    /// Adds a row; `against` names an earlier row's figure.
    pub(crate) fn add(
        &mut self,
        suite: &'static str,
        figure: impl Into<String>,
        unit: Unit,
        samples: Vec<f64>,
        against: Option<&str>,
    ) {
        let row = Row {
            suite,
            figure: figure.into(),
            samples,
            unit,
            against: against.map(str::to_owned),
        };
        let (m, lo, hi) = row.stats();
        eprintln!(
            "  {}: {} median {m:.3} (min {lo:.3}, max {hi:.3})",
            suite, row.figure
        );
        self.rows.push(row);
    }

    /// A note printed with the table.
    pub(crate) fn note(&mut self, line: impl Into<String>) {
        let line = line.into();
        eprintln!("  {line}");
        self.notes.push(line);
    }

    /// Markdown, so docs/performance.md can take it as printed.
    pub(crate) fn render(&self) -> String {
        let mut out = String::from(
            "| suite | figure | median | min | max | n | vs (same run) | ratio |\n|---|---|---|---|---|---|---|---|\n",
        );
        for row in &self.rows {
            let (m, lo, hi) = row.stats();
            let (ratio, vs) = match row
                .against
                .as_ref()
                .and_then(|a| self.rows.iter().find(|r| &r.figure == a))
            {
                Some(base) => (format!("{:.2}x", m / base.stats().0), base.figure.clone()),
                None => ("—".into(), "—".into()),
            };
            let unit = match row.unit {
                Unit::Ms => "ms".to_owned(),
                Unit::PerSec(what) => format!("{what}/s"),
                Unit::MiB => "MiB".to_owned(),
                Unit::Count(what) => what.to_owned(),
            };
            out.push_str(&format!(
                "| {} | {} | {} {unit} | {} | {} | {} | {vs} | {ratio} |\n",
                row.suite,
                row.figure,
                fmt(m),
                fmt(lo),
                fmt(hi),
                row.samples.len()
            ));
        }
        for note in &self.notes {
            out.push_str(&format!("\n{note}\n"));
        }
        out
    }
}

fn fmt(v: f64) -> String {
    if v >= 1000.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Milliseconds taken by `f`.
pub(crate) fn time_ms<T>(f: impl FnOnce() -> T) -> (f64, T) {
    let started = Instant::now();
    let out = f();
    (ms(started.elapsed()), out)
}

/// A duration in milliseconds.
pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
