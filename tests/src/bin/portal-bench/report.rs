//! The report: one row per figure, its target and verdict, the statistics
//! every section reduces its samples with, and the table printed at the end.

use std::time::Duration;

/// One line of the report.
pub(super) struct Row {
    pub(super) name: String,
    pub(super) portal: f64,
    pub(super) raw: Option<f64>,
    pub(super) unit: &'static str,
    pub(super) target: Option<Target>,
    pub(super) note: String,
}

/// A target and whether it was met.
#[derive(Clone, Copy)]
pub(super) enum Target {
    /// portal ≥ ratio × raw.
    MinRatio(f64),
    /// portal ≤ raw + margin.
    MaxOverRaw(f64),
    /// portal ≤ limit.
    Max(f64),
}

impl Target {
    pub(super) fn describe(self, unit: &str) -> String {
        match self {
            Self::MinRatio(r) => format!("≥ {r} × raw"),
            Self::MaxOverRaw(m) => format!("≤ raw + {m} {unit}"),
            Self::Max(l) => format!("≤ {l} {unit}"),
        }
    }

    pub(super) fn met(self, portal: f64, raw: Option<f64>) -> bool {
        match (self, raw) {
            (Self::MinRatio(r), Some(raw)) => portal >= r * raw,
            (Self::MaxOverRaw(m), Some(raw)) => portal <= raw + m,
            (Self::Max(l), _) => portal <= l,
            _ => false,
        }
    }
}

pub(super) fn row(
    name: impl Into<String>,
    portal: f64,
    raw: Option<f64>,
    unit: &'static str,
    target: Option<Target>,
) -> Row {
    Row { name: name.into(), portal, raw, unit, target, note: String::new() }
}

pub(super) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss,
        reason = "an index into a short list"
    )]
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

pub(super) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[allow(clippy::cast_precision_loss, reason = "megabytes for display")]
pub(super) fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1_000_000.0
}

pub(super) fn print_table(rows: &[Row], machine: &str) {
    println!("portal-bench · {machine}");
    println!("{:<62} {:>12} {:>12} {:>7}  {:<22}", "measure", "portal", "raw", "ratio", "target");
    for r in rows {
        let raw = r.raw.map_or_else(|| "-".into(), |v| format!("{v:.3}"));
        let ratio = r
            .raw
            .filter(|v| *v > 0.0)
            .map_or_else(|| "-".into(), |v| format!("{:.2}", r.portal / v));
        let (target, verdict) = match r.target {
            Some(t) => (t.describe(r.unit), if t.met(r.portal, r.raw) { "PASS" } else { "MISS" }),
            None => (String::new(), ""),
        };
        println!(
            "{:<62} {:>12} {:>12} {:>7}  {:<22} {verdict} {}",
            format!("{} ({})", r.name, r.unit),
            if r.unit == "chars" { format!("{:.0}", r.portal) } else { format!("{:.3}", r.portal) },
            raw,
            ratio,
            target,
            r.note
        );
    }
}

pub(super) fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .next()
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map_or_else(String::new, |kb| format!(", {} GiB", kb / 1024 / 1024));
    format!("{cpus} cores{mem}, {}", std::env::consts::ARCH)
}
