//! Latency recording with HdrHistogram: one histogram per thread, merged at the end.

use hdrhistogram::Histogram;
use serde::Serialize;

/// Records latencies in nanoseconds, from 1 ns to 100 s, with 3 significant digits.
pub struct LatencyRecorder {
    histogram: Histogram<u64>,
}

impl LatencyRecorder {
    pub fn new() -> Self {
        let histogram =
            Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("constant bounds are valid"); // 1 ns .. 100 s, 3 digits: always accepted
        Self { histogram }
    }

    pub fn record_ns(&mut self, ns: u64) {
        self.histogram.saturating_record(ns.max(1));
    }

    pub fn merge(&mut self, other: &LatencyRecorder) {
        // Both histograms have the same bounds, so adding cannot fail.
        let _ = self.histogram.add(&other.histogram);
    }

    pub fn summary_us(&self) -> LatencySummary {
        let us = |q: f64| self.histogram.value_at_quantile(q) as f64 / 1000.0;
        LatencySummary {
            p50: us(0.50),
            p95: us(0.95),
            p99: us(0.99),
            p999: us(0.999),
            max: self.histogram.max() as f64 / 1000.0,
            mean: self.histogram.mean() / 1000.0,
        }
    }
}

/// Percentiles in microseconds.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct LatencySummary {
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    pub mean: f64,
}
