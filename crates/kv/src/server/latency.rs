//! Per-command latency tracking, as Redis 7's `latency-tracking` (on by default there):
//! each command's run time, from its start to its reply (not the pass's durability wait,
//! which the reply then waits for), recorded in an HDR histogram per command name (per
//! subcommand for container commands: `client|id`, `config|get`), which INFO
//! `latencystats` summarises as percentiles and LATENCY HISTOGRAM lists as power-of-two
//! buckets. Each event loop records into its own histograms, under a lock only INFO and
//! LATENCY take besides it, so the loops never contend for one; a report merges them.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use parking_lot::Mutex;
use tailstore_resp::Reply;

use crate::command::Command;

/// Redis's bounds: 1 ns to 1 s, two significant figures (longer runs count as 1 s).
const LOWEST_NS: u64 = 1;
const HIGHEST_NS: u64 = 1_000_000_000;
const SIGNIFICANT_FIGURES: u8 = 2;
/// INFO's percentiles (Redis's `latency-tracking-info-percentiles` default).
pub const INFO_PERCENTILES: [f64; 3] = [50.0, 99.0, 99.9];

/// Commands that hold subcommands: their latencies are kept per subcommand, as Redis keeps
/// them.
const CONTAINERS: &[&str] = &[
    "acl", "client", "cluster", "command", "config", "function", "latency", "memory", "module",
    "object", "pubsub", "script", "slowlog", "xgroup", "xinfo",
];

/// One event loop's histograms, by command name.
#[derive(Default)]
pub struct Latencies {
    by_command: Mutex<BTreeMap<String, Histogram<u64>>>,
}

impl Latencies {
    /// Records one run of `command` (its arguments name the subcommand of a container).
    pub fn record(&self, command: &Command, args: &[Vec<u8>], took: Duration) {
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        let ns = ns.clamp(LOWEST_NS, HIGHEST_NS);
        let mut by_command = self.by_command.lock();
        // A container's runs are kept under `name|sub` only (its bare name, with no
        // subcommand, fails its arity before it runs), so its name alone finds nothing.
        if let Some(histogram) = by_command.get_mut(command.name) {
            // Within the bounds, as clamped above: recording cannot fail.
            let _ = histogram.record(ns);
            return;
        }
        if let Some(histogram) = histogram_of(&mut by_command, tracked_name(command, args)) {
            let _ = histogram.record(ns);
        }
    }

    /// CONFIG RESETSTAT.
    pub fn reset(&self) {
        self.by_command.lock().clear();
    }

    /// Adds this loop's histograms into `into`.
    fn merge_into(&self, into: &mut BTreeMap<String, Histogram<u64>>) {
        for (name, histogram) in self.by_command.lock().iter() {
            if let Some(merged) = histogram_of(into, name.clone()) {
                // Same bounds on both sides: adding cannot fail.
                let _ = merged.add(histogram);
            }
        }
    }
}

/// `name`'s histogram in `map`, made if it is not there (`None` only if Redis's constant
/// bounds were refused, which they are not: the run then goes unrecorded).
fn histogram_of(
    map: &mut BTreeMap<String, Histogram<u64>>,
    name: String,
) -> Option<&mut Histogram<u64>> {
    match map.entry(name) {
        std::collections::btree_map::Entry::Occupied(entry) => Some(entry.into_mut()),
        std::collections::btree_map::Entry::Vacant(entry) => {
            let histogram =
                Histogram::new_with_bounds(LOWEST_NS, HIGHEST_NS, SIGNIFICANT_FIGURES).ok()?;
            Some(entry.insert(histogram))
        }
    }
}

/// The name a run is recorded under: the command's, or `container|subcommand`.
fn tracked_name(command: &Command, args: &[Vec<u8>]) -> String {
    match args.get(1) {
        Some(sub) if CONTAINERS.contains(&command.name) => format!(
            "{}|{}",
            command.name,
            String::from_utf8_lossy(sub).to_ascii_lowercase()
        ),
        _ => command.name.to_string(),
    }
}

/// Every loop's histograms, merged.
fn merged(loops: &[&Latencies]) -> BTreeMap<String, Histogram<u64>> {
    let mut all = BTreeMap::new();
    for latencies in loops {
        latencies.merge_into(&mut all);
    }
    all
}

/// INFO `latencystats`: a line per command that ran, its percentiles in microseconds.
pub fn info_lines(loops: &[&Latencies]) -> String {
    let mut text = String::new();
    for (name, histogram) in merged(loops) {
        let percentiles: Vec<String> = INFO_PERCENTILES
            .iter()
            .map(|p| {
                let us = histogram.value_at_percentile(*p) as f64 / 1000.0;
                format!("p{}={us:.3}", trim_percentile(*p))
            })
            .collect();
        text.push_str(&format!(
            "latency_percentiles_usec_{name}:{}\r\n",
            percentiles.join(",")
        ));
    }
    text
}

/// `50.0` as `50`, `99.9` as `99.9`, as Redis writes them.
fn trim_percentile(p: f64) -> String {
    let text = format!("{p}");
    text.strip_suffix(".0").map_or(text.clone(), str::to_string)
}

/// LATENCY HISTOGRAM [command …]: for each command named, in the order named (a container
/// names each of its subcommands that ran; all that ran, if none is named), its calls and
/// a cumulative count per power-of-two bucket of microseconds, as Redis reports them.
pub fn histogram_reply(loops: &[&Latencies], names: &[Vec<u8>]) -> Reply {
    let all = merged(loops);
    let picked: Vec<(&String, &Histogram<u64>)> = if names.is_empty() {
        all.iter().collect()
    } else {
        names
            .iter()
            .flat_map(|name| {
                let name = String::from_utf8_lossy(name).to_ascii_lowercase();
                let container = format!("{name}|");
                all.iter()
                    .filter(move |(ran, _)| **ran == name || ran.starts_with(&container))
            })
            .collect()
    };
    let text = |word: &str| Reply::Bulk(word.as_bytes().to_vec());
    let entries = picked
        .into_iter()
        .map(|(name, histogram)| {
            let detail = vec![
                (text("calls"), Reply::Int(histogram.len() as i64)),
                (text("histogram_usec"), Reply::Map(buckets(histogram))),
            ];
            (text(name), Reply::Map(detail))
        })
        .collect();
    Reply::Map(entries)
}

/// Redis's buckets: from 1,024 ns up by powers of two, each that took runs named by its
/// highest value in µs, with the count of runs up to it.
fn buckets(histogram: &Histogram<u64>) -> Vec<(Reply, Reply)> {
    histogram
        .iter_log(1024, 2.0)
        .filter(|step| step.count_since_last_iteration() > 0)
        .map(|step| {
            // The crate's step ends one below the next level, where Redis's C library
            // names the level itself.
            let level = step.value_iterated_to() + 1;
            let us = histogram.highest_equivalent(level) / 1000;
            let cumulative = histogram.count_between(0, step.value_iterated_to());
            (Reply::Int(us as i64), Reply::Int(cumulative as i64))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::lookup;

    fn words(line: &str) -> Vec<Vec<u8>> {
        line.split(' ').map(|w| w.as_bytes().to_vec()).collect()
    }

    fn record(latencies: &Latencies, line: &str, us: u64) {
        let args = words(line);
        let command = lookup(&args[0]).expect("a command");
        latencies.record(command, &args, Duration::from_micros(us));
    }

    #[test]
    fn loops_are_merged_and_containers_kept_per_subcommand() {
        let (one, two) = (Latencies::default(), Latencies::default());
        for us in [5, 6, 7] {
            record(&one, "set k v", us);
        }
        record(&two, "set k v", 1000);
        record(&two, "client id", 3);
        record(&two, "CLIENT SETNAME x", 3);
        let lines = info_lines(&[&one, &two]);
        assert!(
            lines.contains("latency_percentiles_usec_client|id:"),
            "{lines}"
        );
        assert!(
            lines.contains("latency_percentiles_usec_client|setname:"),
            "{lines}"
        );
        let set = lines
            .lines()
            .find(|l| l.starts_with("latency_percentiles_usec_set:"))
            .expect("set's line");
        // p50 among 5, 6, 7, 1000 µs (two significant figures); p99 is the 1000 µs run.
        assert!(set.contains("p50=6.") && set.contains(",p99=10"), "{set}");
        let Reply::Map(entries) = histogram_reply(&[&one, &two], &words("set")) else {
            panic!("a map")
        };
        assert_eq!(entries.len(), 1);
        let Reply::Map(detail) = &entries[0].1 else {
            panic!("a map")
        };
        assert_eq!(detail[0].1, Reply::Int(4), "four calls");
        let Reply::Map(buckets) = &detail[1].1 else {
            panic!("a map")
        };
        assert_eq!(
            buckets[0],
            (Reply::Int(8), Reply::Int(3)),
            "5-7 µs: up to 8 µs"
        );
        let counts: Vec<&Reply> = buckets.iter().map(|(_, count)| count).collect();
        assert_eq!(
            counts.last(),
            Some(&&Reply::Int(4)),
            "cumulative: {buckets:?}"
        );
        one.reset();
        two.reset();
        assert!(info_lines(&[&one, &two]).is_empty());
    }
}
