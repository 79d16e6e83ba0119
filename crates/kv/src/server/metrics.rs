//! INFO's instantaneous figures (`instantaneous_ops_per_sec`, `instantaneous_input_kbps`,
//! `instantaneous_output_kbps`), as Redis computes them: the totals are sampled ten times a
//! second (by the housekeeping thread, `server/mod.rs`), and each figure is the rate over
//! the last [`SAMPLES`] intervals, 1.6 s (Redis averages its last 16 per-interval rates,
//! which is the same when the intervals are equal).

use std::collections::VecDeque;
use std::time::Instant;

use parking_lot::Mutex;

/// Intervals a rate covers.
const SAMPLES: usize = 16;

/// Totals that only grow: commands run, bytes read and written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub commands: u64,
    pub input: u64,
    pub output: u64,
}

/// Rates per second over the last samples.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PerSecond {
    pub ops: f64,
    pub input_kbps: f64,
    pub output_kbps: f64,
}

/// The last samples of the totals, oldest first.
#[derive(Default)]
pub struct Rates {
    samples: Mutex<VecDeque<(Instant, Totals)>>,
}

impl Rates {
    pub fn sample(&self, at: Instant, totals: Totals) {
        let mut samples = self.samples.lock();
        if samples.len() > SAMPLES {
            samples.pop_front();
        }
        samples.push_back((at, totals));
    }

    /// The rates between the oldest sample kept and the newest; zero before two samples.
    pub fn per_second(&self) -> PerSecond {
        let samples = self.samples.lock();
        let (Some(&(began, first)), Some(&(ended, last))) = (samples.front(), samples.back())
        else {
            return PerSecond::default();
        };
        let seconds = ended.saturating_duration_since(began).as_secs_f64();
        if seconds <= 0.0 {
            return PerSecond::default();
        }
        let rate = |from: u64, to: u64| to.saturating_sub(from) as f64 / seconds;
        PerSecond {
            ops: rate(first.commands, last.commands),
            input_kbps: rate(first.input, last.input) / 1024.0,
            output_kbps: rate(first.output, last.output) / 1024.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn totals(commands: u64, input: u64, output: u64) -> Totals {
        Totals {
            commands,
            input,
            output,
        }
    }

    #[test]
    fn rates_are_over_the_last_sixteen_intervals() {
        let rates = Rates::default();
        assert_eq!(rates.per_second(), PerSecond::default());
        let start = Instant::now();
        let tenth = Duration::from_millis(100);
        // 100 commands and 10 KiB in, 20 KiB out per tenth of a second, then idle.
        for i in 0..=16u32 {
            let n = u64::from(i);
            rates.sample(start + tenth * i, totals(100 * n, 10_240 * n, 20_480 * n));
        }
        let busy = rates.per_second();
        assert!((busy.ops - 1000.0).abs() < 1e-6, "{busy:?}");
        assert!((busy.input_kbps - 100.0).abs() < 1e-6, "{busy:?}");
        assert!((busy.output_kbps - 200.0).abs() < 1e-6, "{busy:?}");
        for i in 17..=33u32 {
            rates.sample(start + tenth * i, totals(1600, 163_840, 327_680));
        }
        assert_eq!(rates.per_second().ops, 0.0, "idle for the whole window");
    }
}
