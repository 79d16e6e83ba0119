//! Per-command statistics, as Redis 7 keeps them: each command's calls, run time and
//! failures (INFO `commandstats`), an HDR histogram of its run times (`latency-tracking`,
//! on by default in Redis: INFO `latencystats`, LATENCY HISTOGRAM), and the error replies
//! by their first word (INFO `errorstats`). A run time is a command's from its start to
//! its reply (not the pass's durability wait, which the reply then waits for), kept per
//! command name (per subcommand for container commands: `client|id`, `config|get`). Each
//! event loop keeps its own, under locks only INFO and LATENCY take besides it, so the
//! loops never contend for one; a report merges them.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use parking_lot::Mutex;
use tailstore_resp::Reply;

use crate::command::{subcommands, Command};

/// Redis's bounds: 1 ns to 1 s, two significant figures (longer runs count as 1 s).
const LOWEST_NS: u64 = 1;
const HIGHEST_NS: u64 = 1_000_000_000;
const SIGNIFICANT_FIGURES: u8 = 2;
/// INFO's percentiles (Redis's `latency-tracking-info-percentiles` default).
const INFO_PERCENTILES: [f64; 3] = [50.0, 99.0, 99.9];

/// One command's figures on one event loop.
struct Tally {
    histogram: Histogram<u64>,
    /// Nanoseconds of all its runs.
    total_ns: u64,
    /// Runs that answered an error.
    failed: u64,
    /// Calls refused before they ran (a wrong number of arguments).
    rejected: u64,
}

impl Tally {
    fn new() -> Option<Tally> {
        Some(Tally {
            histogram: Histogram::new_with_bounds(LOWEST_NS, HIGHEST_NS, SIGNIFICANT_FIGURES)
                .ok()?,
            total_ns: 0,
            failed: 0,
            rejected: 0,
        })
    }

    fn add(&mut self, other: &Tally) {
        // Same bounds on both sides: adding cannot fail.
        let _ = self.histogram.add(&other.histogram);
        self.total_ns = self.total_ns.saturating_add(other.total_ns);
        self.failed += other.failed;
        self.rejected += other.rejected;
    }

    fn calls(&self) -> u64 {
        self.histogram.len()
    }
}

/// One event loop's figures, by command name, and its error replies by first word.
#[derive(Default)]
pub struct CommandStats {
    by_command: Mutex<BTreeMap<String, Tally>>,
    errors: Mutex<BTreeMap<String, u64>>,
}

impl CommandStats {
    /// Records one run of `command` (its arguments name the subcommand of a container),
    /// which took `took` and answered `reply` (`None`: it blocked). A container's unknown
    /// subcommand is not recorded, as in Redis: its name is the client's to choose, and
    /// each would hold a histogram.
    pub fn record(
        &self,
        command: &Command,
        args: &[Vec<u8>],
        took: Duration,
        reply: Option<&Reply>,
    ) {
        let failed = match reply {
            Some(Reply::Error(text)) if text.starts_with("ERR unknown subcommand") => return,
            Some(Reply::Error(_)) => true,
            _ => false,
        };
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        let mut by_command = self.by_command.lock();
        // A container's runs are kept under `name|sub` only (its bare name, with no
        // subcommand, fails its arity before it runs), so its name alone finds nothing.
        let tally = match by_command.get_mut(command.name) {
            Some(tally) => tally,
            None => match tally_of(&mut by_command, tracked_name(command, args)) {
                Some(tally) => tally,
                None => return,
            },
        };
        // Within the bounds, once clamped: recording cannot fail.
        let _ = tally.histogram.record(ns.clamp(LOWEST_NS, HIGHEST_NS));
        tally.total_ns = tally.total_ns.saturating_add(ns);
        tally.failed += u64::from(failed);
    }

    /// Counts a call of `command` refused before it ran.
    pub fn reject(&self, command: &Command, args: &[Vec<u8>]) {
        let mut by_command = self.by_command.lock();
        if let Some(tally) = tally_of(&mut by_command, tracked_name(command, args)) {
            tally.rejected += 1;
        }
    }

    /// Counts an error reply by its first word (`ERR`, `WRONGTYPE`…).
    pub fn error(&self, text: &str) {
        let code = text.split(' ').next().unwrap_or_default();
        *self.errors.lock().entry(code.to_string()).or_insert(0) += 1;
    }

    /// CONFIG RESETSTAT.
    pub fn reset(&self) {
        self.by_command.lock().clear();
        self.errors.lock().clear();
    }

    /// Adds this loop's figures into `into`.
    fn merge_into(&self, into: &mut BTreeMap<String, Tally>) {
        for (name, tally) in self.by_command.lock().iter() {
            if let Some(merged) = tally_of(into, name.clone()) {
                merged.add(tally);
            }
        }
    }
}

/// `name`'s tally in `map`, made if it is not there (`None` only if Redis's constant
/// bounds were refused, which they are not: the run then goes unrecorded).
fn tally_of(map: &mut BTreeMap<String, Tally>, name: String) -> Option<&mut Tally> {
    match map.entry(name) {
        std::collections::btree_map::Entry::Occupied(entry) => Some(entry.into_mut()),
        std::collections::btree_map::Entry::Vacant(entry) => Some(entry.insert(Tally::new()?)),
    }
}

/// The name a run is recorded under: the command's, or `container|subcommand`.
fn tracked_name(command: &Command, args: &[Vec<u8>]) -> String {
    match args.get(1) {
        // A container's latencies are kept per subcommand, as Redis keeps them.
        Some(sub) if subcommands::of(command.name).is_some() => format!(
            "{}|{}",
            command.name,
            String::from_utf8_lossy(sub).to_ascii_lowercase()
        ),
        _ => command.name.to_string(),
    }
}

/// Every loop's figures, merged.
fn merged(loops: &[&CommandStats]) -> BTreeMap<String, Tally> {
    let mut all = BTreeMap::new();
    for stats in loops {
        stats.merge_into(&mut all);
    }
    all
}

/// INFO `commandstats`: a line per command called or refused.
pub fn commandstats_lines(loops: &[&CommandStats]) -> String {
    let mut text = String::new();
    for (name, tally) in merged(loops) {
        let usec = tally.total_ns / 1000;
        let per_call = match tally.calls() {
            0 => 0.0,
            calls => usec as f64 / calls as f64,
        };
        text.push_str(&format!(
            "cmdstat_{name}:calls={},usec={usec},usec_per_call={per_call:.2},\
             rejected_calls={},failed_calls={}\r\n",
            tally.calls(),
            tally.rejected,
            tally.failed
        ));
    }
    text
}

/// INFO `errorstats`: a line per first word of the error replies sent.
pub fn errorstats_lines(loops: &[&CommandStats]) -> String {
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for stats in loops {
        for (code, count) in stats.errors.lock().iter() {
            *counts.entry(code.clone()).or_insert(0) += count;
        }
    }
    counts
        .iter()
        .map(|(code, count)| format!("errorstat_{code}:count={count}\r\n"))
        .collect()
}

/// Error replies sent in all (INFO's `total_error_replies`).
pub fn total_errors(loops: &[&CommandStats]) -> u64 {
    loops
        .iter()
        .map(|stats| stats.errors.lock().values().sum::<u64>())
        .sum()
}

/// INFO `latencystats`: a line per command that ran, its percentiles in microseconds.
pub fn latencystats_lines(loops: &[&CommandStats]) -> String {
    let mut text = String::new();
    for (name, tally) in merged(loops) {
        if tally.calls() == 0 {
            continue; // refused only
        }
        let histogram = &tally.histogram;
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

/// CONFIG GET `latency-tracking-info-percentiles`: the percentiles INFO reports.
pub fn info_percentiles_setting() -> String {
    let each: Vec<String> = INFO_PERCENTILES
        .iter()
        .map(|p| trim_percentile(*p))
        .collect();
    each.join(" ")
}

/// LATENCY HISTOGRAM [command …]: for each command named, in the order named (a container
/// names each of its subcommands that ran; all that ran, if none is named), its calls and
/// a cumulative count per power-of-two bucket of microseconds, as Redis reports them.
pub fn histogram_reply(loops: &[&CommandStats], names: &[Vec<u8>]) -> Reply {
    let all: BTreeMap<String, Histogram<u64>> = merged(loops)
        .into_iter()
        .filter(|(_, tally)| tally.calls() > 0)
        .map(|(name, tally)| (name, tally.histogram))
        .collect();
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

    fn record(stats: &CommandStats, line: &str, us: u64) {
        let args = words(line);
        let command = lookup(&args[0]).expect("a command");
        stats.record(command, &args, Duration::from_micros(us), None);
    }

    #[test]
    fn loops_are_merged_and_containers_kept_per_subcommand() {
        let (one, two) = (CommandStats::default(), CommandStats::default());
        for us in [5, 6, 7] {
            record(&one, "set k v", us);
        }
        record(&two, "set k v", 1000);
        record(&two, "client id", 3);
        record(&two, "CLIENT SETNAME x", 3);
        let lines = latencystats_lines(&[&one, &two]);
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
        assert!(latencystats_lines(&[&one, &two]).is_empty());
    }

    #[test]
    fn calls_failures_refusals_and_errors_are_counted_as_redis_counts_them() {
        let (one, two) = (CommandStats::default(), CommandStats::default());
        let args = words("lpush a x");
        let lpush = lookup(b"lpush").expect("a command");
        let wrongtype = Reply::error("WRONGTYPE Operation against a key holding the wrong kind");
        one.record(lpush, &args, Duration::from_micros(10), Some(&wrongtype));
        two.record(
            lpush,
            &args,
            Duration::from_micros(20),
            Some(&Reply::Int(1)),
        );
        let client = lookup(b"client").expect("a command");
        let unknown = Reply::error("ERR unknown subcommand 'x'. Try CLIENT HELP.");
        two.record(
            client,
            &words("client x"),
            Duration::from_micros(5),
            Some(&unknown),
        );
        let get = lookup(b"get").expect("a command");
        two.reject(get, &words("get"));
        one.error("WRONGTYPE Operation against a key holding the wrong kind of value");
        two.error("ERR wrong number of arguments for 'get' command");
        two.error("ERR unknown command 'x'");
        let lines = commandstats_lines(&[&one, &two]);
        assert!(
            lines.contains("cmdstat_lpush:calls=2,usec=30,usec_per_call=15.00,rejected_calls=0,failed_calls=1\r\n"),
            "{lines}"
        );
        assert!(
            lines.contains(
                "cmdstat_get:calls=0,usec=0,usec_per_call=0.00,rejected_calls=1,failed_calls=0\r\n"
            ),
            "{lines}"
        );
        assert!(
            !latencystats_lines(&[&one, &two]).contains("_get:"),
            "refused only"
        );
        assert_eq!(
            errorstats_lines(&[&one, &two]),
            "errorstat_ERR:count=2\r\nerrorstat_WRONGTYPE:count=1\r\n"
        );
        assert_eq!(total_errors(&[&one, &two]), 3);
    }
}
