//! The processors a thread may run on.
//!
//! A server keeps the database's background threads (the checkpointer, the log writer, and
//! whatever the server adds, like the keyspace's housekeeping) on processors of their own
//! when it has processors to spare: their work streams over whole pages (checksums, copies
//! into the double-write area and the data file) and, wherever it runs, evicts what the
//! event loops keep in that processor's cache (ARCHITECTURE.md, decision 103). Placement is a
//! matter of speed only: nothing waits on it and nothing depends on it for correctness.

use std::fmt;
use std::str::FromStr;

use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};

/// Why a processor list could not be read, parsed or applied.
#[derive(Debug, thiserror::Error)]
pub enum CpuError {
    #[error("invalid processor list `{list}`: {reason} (expected e.g. `1`, `2-3` or `0,4-7`)")]
    Parse { list: String, reason: String },
    #[error("cannot read the processors this process may run on: {0}")]
    Allowed(#[source] std::io::Error),
    #[error("processors {list} are not all among those this process may run on ({allowed})")]
    NotAllowed { list: CpuList, allowed: CpuList },
    #[error("cannot confine a thread to processors {list}: {source}")]
    Confine {
        list: CpuList,
        #[source]
        source: std::io::Error,
    },
}

/// A non-empty set of processors by number, in increasing order, written as Linux writes
/// them (`0-3,6`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuList(Vec<usize>);

impl CpuList {
    /// The processors the calling thread may run on: all of the machine's, or what
    /// `taskset` or a cgroup's cpuset left it.
    pub fn allowed() -> Result<CpuList, CpuError> {
        let set = sched_getaffinity(None).map_err(|e| CpuError::Allowed(e.into()))?;
        let cpus: Vec<usize> = (0..CpuSet::MAX_CPU).filter(|&i| set.is_set(i)).collect();
        // The kernel never leaves a thread without a processor.
        assert!(!cpus.is_empty(), "a thread allowed on no processor");
        Ok(CpuList(cpus))
    }

    pub fn cpus(&self) -> &[usize] {
        &self.0
    }

    /// The list's processors grouped by the core they share (the hardware threads of a core
    /// share its caches), each core in the order of its first processor. `siblings(cpu)`
    /// names the processors of `cpu`'s core, those outside the list left out; `None` (not
    /// known) makes `cpu` a core of its own. See [`CpuList::core_siblings`].
    pub fn cores(&self, siblings: impl Fn(usize) -> Option<CpuList>) -> Vec<CpuList> {
        let mut cores: Vec<CpuList> = Vec::new();
        for &cpu in &self.0 {
            if cores.iter().any(|core| core.0.contains(&cpu)) {
                continue;
            }
            let shared = siblings(cpu)
                .map(|all| all.0.into_iter().filter(|c| self.0.contains(c)).collect())
                .filter(|shared: &Vec<usize>| shared.contains(&cpu))
                .unwrap_or_else(|| vec![cpu]);
            cores.push(CpuList(shared));
        }
        cores
    }

    /// The processors that share `cpu`'s core, as Linux lists them in
    /// `/sys/devices/system/cpu/cpuN/topology/` (`None` where the file is missing or
    /// unreadable, as in some containers). A read of the machine's description, like
    /// `sched_getaffinity`, not of the database's files: those go through `tailstore_media`.
    pub fn core_siblings(cpu: usize) -> Option<CpuList> {
        let topology = format!("/sys/devices/system/cpu/cpu{cpu}/topology");
        ["core_cpus_list", "thread_siblings_list"]
            .iter()
            .find_map(|file| std::fs::read_to_string(format!("{topology}/{file}")).ok())
            .and_then(|list| list.trim().parse().ok())
    }

    /// The processors of all of `lists` (`None` if they name none).
    pub fn joined(lists: &[CpuList]) -> Option<CpuList> {
        let mut cpus: Vec<usize> = lists.iter().flat_map(|list| list.0.clone()).collect();
        cpus.sort_unstable();
        cpus.dedup();
        (!cpus.is_empty()).then_some(CpuList(cpus))
    }

    /// `Err(NotAllowed)` unless every processor of the list is in `allowed`.
    pub fn check_within(&self, allowed: &CpuList) -> Result<(), CpuError> {
        if self
            .0
            .iter()
            .all(|cpu| allowed.0.binary_search(cpu).is_ok())
        {
            return Ok(());
        }
        Err(CpuError::NotAllowed {
            list: self.clone(),
            allowed: allowed.clone(),
        })
    }

    /// [`CpuList::confine_current_thread`] for a background thread, which has no one to
    /// report a refusal to: one (the process's processors changed since the list was checked
    /// against them) leaves the thread where the scheduler puts it.
    pub fn keep_current_thread(&self) {
        let _ = self.confine_current_thread();
    }

    /// Keeps the calling thread on these processors from now on.
    pub fn confine_current_thread(&self) -> Result<(), CpuError> {
        let mut set = CpuSet::new();
        for &cpu in &self.0 {
            set.set(cpu);
        }
        sched_setaffinity(None, &set).map_err(|e| CpuError::Confine {
            list: self.clone(),
            source: e.into(),
        })
    }
}

impl FromStr for CpuList {
    type Err = CpuError;

    fn from_str(list: &str) -> Result<CpuList, CpuError> {
        let invalid = |reason: String| CpuError::Parse {
            list: list.to_string(),
            reason,
        };
        let number = |text: &str| {
            text.trim()
                .parse::<usize>()
                .ok()
                .filter(|&cpu| cpu < CpuSet::MAX_CPU)
                .ok_or_else(|| {
                    invalid(format!(
                        "`{text}` is not a processor number below {}",
                        CpuSet::MAX_CPU
                    ))
                })
        };
        let mut cpus = Vec::new();
        for part in list.split(',') {
            let (first, last) = match part.split_once('-') {
                Some((first, last)) => (number(first)?, number(last)?),
                None => (number(part)?, number(part)?),
            };
            if first > last {
                return Err(invalid(format!("the range `{part}` runs backwards")));
            }
            cpus.extend(first..=last);
        }
        cpus.sort_unstable();
        cpus.dedup();
        Ok(CpuList(cpus))
    }
}

impl fmt::Display for CpuList {
    /// Runs of consecutive processors as ranges: `0-3,6`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for &cpu in &self.0 {
            match runs.last_mut() {
                Some((_, last)) if *last + 1 == cpu => *last = cpu,
                _ => runs.push((cpu, cpu)),
            }
        }
        let text: Vec<String> = runs
            .iter()
            .map(|&(first, last)| {
                if first == last {
                    first.to_string()
                } else {
                    format!("{first}-{last}")
                }
            })
            .collect();
        f.write_str(&text.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(text: &str) -> CpuList {
        text.parse().expect("a valid list")
    }

    #[test]
    fn lists_parse_as_linux_writes_them_and_print_back() {
        assert_eq!(list("1").cpus(), &[1]);
        assert_eq!(list("0-3,6").cpus(), &[0, 1, 2, 3, 6]);
        assert_eq!(list("6,0-2,1").cpus(), &[0, 1, 2, 6]);
        assert_eq!(list(" 2 - 3 ").cpus(), &[2, 3]);
        for text in ["0-3,6", "1", "0,2,4-5"] {
            assert_eq!(list(text).to_string(), text);
        }
    }

    #[test]
    fn malformed_lists_are_refused_with_the_reason() {
        for (text, reason) in [
            ("", "`` is not a processor number"),
            ("a", "`a` is not a processor number"),
            ("3-1", "runs backwards"),
            ("1,,2", "`` is not a processor number"),
            ("-1", "`` is not a processor number"),
            ("99999", "`99999` is not a processor number below"),
        ] {
            let err = text.parse::<CpuList>().expect_err(text).to_string();
            assert!(err.contains(reason), "{text:?}: {err}");
        }
    }

    /// Two cores of two hardware threads each, numbered apart (0 and 2 share a core, 1 and
    /// 3 the other), as Linux numbers them on most Intel machines.
    fn smt_apart(cpu: usize) -> Option<CpuList> {
        Some(list(if cpu.is_multiple_of(2) { "0,2" } else { "1,3" }))
    }

    #[test]
    fn processors_are_grouped_by_the_core_they_share() {
        assert_eq!(list("0-3").cores(smt_apart), vec![list("0,2"), list("1,3")]);
        // Siblings outside the list are left out.
        assert_eq!(list("0-2").cores(smt_apart), vec![list("0,2"), list("1")]);
        // Unknown topology, or a sibling list without the processor: a core each.
        assert_eq!(list("0-1").cores(|_| None), vec![list("0"), list("1")]);
        assert_eq!(list("5").cores(|_| Some(list("1"))), vec![list("5")]);
        let machine = CpuList::allowed().expect("allowed");
        let cores = machine.cores(CpuList::core_siblings);
        assert_eq!(CpuList::joined(&cores), Some(machine));
        assert_eq!(CpuList::joined(&[]), None);
    }

    #[test]
    fn a_list_outside_the_allowed_ones_is_refused() {
        let allowed = list("0-3");
        assert!(list("1-2").check_within(&allowed).is_ok());
        let err = list("2-4")
            .check_within(&allowed)
            .expect_err("4 is not allowed");
        assert_eq!(
            err.to_string(),
            "processors 2-4 are not all among those this process may run on (0-3)"
        );
    }

    #[test]
    fn a_thread_confined_to_one_allowed_processor_runs_there() {
        let allowed = CpuList::allowed().expect("allowed processors");
        let last = allowed.cpus().last().expect("never empty");
        let one: CpuList = last.to_string().parse().expect("one");
        let on = std::thread::spawn(move || {
            one.confine_current_thread().expect("confine");
            (CpuList::allowed().expect("allowed"), one)
        });
        let (now, one) = on.join().expect("thread");
        assert_eq!(now, one);
        // The spawning thread kept its own.
        assert_eq!(CpuList::allowed().expect("allowed"), allowed);
    }
}
