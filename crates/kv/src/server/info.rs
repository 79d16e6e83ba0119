//! INFO's sections, in Redis's `field:value` form, plus tailstore's own durability fields.
//!
//! Every field Redis 7.0 reports is here with a value true of tailstore (no replica, no
//! fork, no defragmentation, no eviction: those count nothing), except the ones that
//! describe Redis's own insides with no counterpart here; `info_fields.rs` in the tests
//! lists those, and checks the rest against a real Redis's INFO.

use std::io::Read;
use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

use tailstore_engine::RestartRedo;

use super::admin::REDIS_VERSION;
use super::command_stats;
use super::pubsub::Target;
use super::Shared;

/// A section: its name, its title, whether a bare INFO (`default`) shows it, and its body.
type Section = (&'static str, &'static str, bool, fn(&Shared) -> String);

/// INFO's sections in Redis's order.
const SECTIONS: &[Section] = &[
    ("server", "Server", true, server),
    ("clients", "Clients", true, clients),
    ("memory", "Memory", true, memory),
    ("persistence", "Persistence", true, persistence),
    ("stats", "Stats", true, stats),
    ("replication", "Replication", true, replication),
    ("cpu", "CPU", true, cpu),
    ("modules", "Modules", true, |_| String::new()), // none loaded
    ("commandstats", "Commandstats", false, commandstats),
    ("errorstats", "Errorstats", true, errorstats),
    ("latencystats", "Latencystats", false, latencystats),
    ("cluster", "Cluster", true, |_| {
        "cluster_enabled:0\r\n".into()
    }),
    ("keyspace", "Keyspace", true, keyspace),
];

/// INFO [section …]: the sections asked for (lowercase names; none, `default`, `all` or
/// `everything` as Redis reads them), each under its `# Name` line, a blank line between.
pub fn report(shared: &Shared, wanted: &[String]) -> String {
    let everything = wanted.iter().any(|w| w == "all" || w == "everything");
    let default = wanted.is_empty() || wanted.iter().any(|w| w == "default");
    let mut text = String::new();
    for &(name, title, in_default, body) in SECTIONS {
        if !(everything || default && in_default || wanted.iter().any(|w| w == name)) {
            continue;
        }
        if !text.is_empty() {
            text.push_str("\r\n");
        }
        text.push_str(&format!("# {title}\r\n{}", body(shared)));
    }
    text
}

fn commandstats(shared: &Shared) -> String {
    command_stats::commandstats_lines(&shared.command_stats())
}

fn errorstats(shared: &Shared) -> String {
    command_stats::errorstats_lines(&shared.command_stats())
}

fn latencystats(shared: &Shared) -> String {
    command_stats::latencystats_lines(&shared.command_stats())
}

/// 40 random hex digits, as Redis draws its run id and replication id at its start.
pub fn random_id() -> String {
    let mut bytes = [0u8; 20];
    let drawn = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if drawn.is_err() {
        // No /dev/urandom (a sandbox): what makes a run unique, hashed.
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let seed = format!("{} {now} {:p}", std::process::id(), &bytes);
        return crate::script::sha1_hex(seed.as_bytes());
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Fields whose value is 0 because what they count never happens here.
fn zeros(names: &[&'static str]) -> Vec<(&'static str, String)> {
    names.iter().map(|name| (*name, "0".to_string())).collect()
}

fn lines(fields: &[(&str, String)]) -> String {
    fields.iter().map(|(k, v)| format!("{k}:{v}\r\n")).collect()
}

fn server(shared: &Shared) -> String {
    let uptime = shared.started.elapsed().as_secs();
    let now_us = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_micros();
    let executable = std::env::current_exe()
        .map(|path| path.display().to_string())
        .unwrap_or_default();
    lines(&[
        ("redis_version", REDIS_VERSION.into()),
        ("tailstore_version", env!("CARGO_PKG_VERSION").into()),
        // Not built from Redis's sources: no commit of theirs.
        ("redis_git_sha1", "00000000".into()),
        ("redis_git_dirty", "0".into()),
        ("redis_mode", "standalone".into()),
        ("os", std::env::consts::OS.into()),
        ("arch_bits", (usize::BITS).to_string()),
        // Rust's `Instant` is CLOCK_MONOTONIC through clock_gettime; mio polls with epoll.
        ("monotonic_clock", "POSIX clock_gettime".into()),
        ("multiplexing_api", "epoll".into()),
        ("process_id", std::process::id().to_string()),
        ("process_supervised", "no".into()),
        ("run_id", shared.run_id.clone()),
        (
            "tcp_port",
            super::admin::port(shared.config.plain_address()),
        ),
        ("server_time_usec", now_us.to_string()),
        ("uptime_in_seconds", uptime.to_string()),
        ("uptime_in_days", (uptime / 86_400).to_string()),
        // The housekeeping thread (active expiry, INFO's rates) wakes ten times a second.
        ("hz", "10".into()),
        ("configured_hz", "10".into()),
        ("executable", executable),
        // tailstore takes its settings from the command line, not a file.
        ("config_file", String::new()),
        ("io_threads_active", shared.config.threads.to_string()),
        (
            "tailstore_poll_spin_us",
            shared.config.poll_spin.as_micros().to_string(),
        ),
    ])
}

fn clients(shared: &Shared) -> String {
    lines(&[
        (
            "connected_clients",
            shared.clients.load(Ordering::Relaxed).to_string(),
        ),
        ("cluster_connections", "0".into()),
        ("maxclients", shared.config.max_clients.to_string()),
        ("blocked_clients", shared.waiters.blocked().to_string()),
        ("tracking_clients", shared.tracking.clients().to_string()),
        (
            "tailstore_live_watches",
            shared.ks.watches.live().to_string(),
        ),
        ("tailstore_clients_per_loop", clients_per_loop(shared)),
    ])
}

/// How many connections each event loop serves, comma-separated in loop order.
fn clients_per_loop(shared: &Shared) -> String {
    let counts: Vec<String> = shared
        .loops
        .iter()
        .map(|state| state.serving.load(Ordering::Relaxed).to_string())
        .collect();
    counts.join(",")
}

fn memory(shared: &Shared) -> String {
    let stats = shared.ks.database().stats();
    let pool_bytes = stats.pool_pages * tailstore_storage::PAGE_SIZE as u64;
    let (libraries, functions) = shared.libraries.counts();
    let resident = crate::command::memory::process_memory().map_or(0, |p| p.resident);
    let total_system = system_memory().unwrap_or(0);
    let megabytes = |bytes: u64| format!("{:.2}M", bytes as f64 / 1048576.0);
    lines(&[
        ("used_memory", pool_bytes.to_string()),
        ("used_memory_human", megabytes(pool_bytes)),
        ("used_memory_rss", resident.to_string()),
        ("used_memory_rss_human", megabytes(resident)),
        // The pool is allocated whole at the start: its size is its peak.
        ("used_memory_peak", pool_bytes.to_string()),
        ("used_memory_peak_human", megabytes(pool_bytes)),
        ("total_system_memory", total_system.to_string()),
        ("total_system_memory_human", megabytes(total_system)),
        ("maxmemory", "0".into()),
        ("maxmemory_human", "0B".into()),
        ("maxmemory_policy", "noeviction".into()),
        ("number_of_cached_scripts", shared.scripts.len().to_string()),
        ("number_of_functions", functions.to_string()),
        ("number_of_libraries", libraries.to_string()),
        (
            "lazyfree_pending_objects",
            shared.ks.lazyfree_pending().unwrap_or(0).to_string(),
        ),
        (
            "lazyfreed_objects",
            shared.ks.key_stats.get().lazyfreed.to_string(),
        ),
        ("tailstore_buffer_pool_pages", stats.pool_pages.to_string()),
        ("tailstore_data_pages", stats.data_pages.to_string()),
    ])
}

fn persistence(shared: &Shared) -> String {
    let config = &shared.config;
    let stats = shared.ks.database().stats();
    let background_redo = match stats.restart_redo {
        RestartRedo::Finished(done) => Some(done),
        RestartRedo::AtOpen | RestartRedo::Pending { .. } => None,
    };
    // Nothing forks here: no copy-on-write, no child's keys.
    let mut fields = vec![("loading", "0".to_string()), ("async_loading", "0".into())];
    fields.extend(zeros(&[
        "current_cow_peak",
        "current_cow_size",
        "current_cow_size_age",
    ]));
    fields.push(("current_fork_perc", "0.00".into()));
    fields.extend(zeros(&[
        "current_save_keys_processed",
        "current_save_keys_total",
    ]));
    // Every acknowledged write is durable already: none waits for a save.
    fields.push(("rdb_changes_since_last_save", "0".into()));
    fields.extend(shared.saves.snapshot_fields());
    fields.extend(zeros(&["rdb_last_cow_size"]));
    fields.push(("aof_enabled", u8::from(config.durable_replies).to_string()));
    fields.extend(shared.saves.rewrite_fields());
    // `err` once the database stopped after a failed write, sync or flush (fail-stop):
    // Redis's field for a failing AOF, which monitoring already watches.
    let write_status = match shared.ks.database().check_running() {
        Ok(()) => "ok",
        Err(_) => "err",
    };
    fields.push(("aof_last_write_status", write_status.into()));
    fields.extend(zeros(&[
        "aof_last_cow_size",
        "module_fork_in_progress",
        "module_fork_last_cow_size",
    ]));
    fields.extend([
        ("tailstore_durability", config.durability.clone()),
        (
            "tailstore_durable_before_reply",
            if config.durable_replies { "yes" } else { "no" }.into(),
        ),
        (
            "tailstore_recovery_ms",
            format!("{:.3}", config.recovery.as_secs_f64() * 1e3),
        ),
        // Pages the restart left to redo at their first use: 0 once the first checkpoint
        // has redone the rest.
        (
            "tailstore_pages_left_to_redo",
            stats.restart_redo.pages_left().to_string(),
        ),
        // What the first checkpoint redid of them, and its time; 0 until it has.
        (
            "tailstore_background_redo_pages",
            background_redo.map_or(0, |done| done.pages).to_string(),
        ),
        (
            "tailstore_background_redo_ms",
            format!(
                "{:.3}",
                background_redo.map_or(0.0, |done| done.time.as_secs_f64() * 1e3)
            ),
        ),
        ("tailstore_checkpoints", stats.checkpoints.to_string()),
        // Their time in all: set against the log between them, whether they keep up.
        (
            "tailstore_checkpoint_ms",
            format!("{:.3}", stats.checkpoint_time.as_secs_f64() * 1e3),
        ),
        // What a restart would replay now, in bytes and in replay weight (each record
        // counted as at least the floor), the bound on the weight, and the writes that
        // waited at that bound for a checkpoint (`--max-replay`).
        (
            "tailstore_log_since_checkpoint_bytes",
            stats.log_since_checkpoint.to_string(),
        ),
        (
            "tailstore_replay_weight_since_checkpoint",
            stats.weight_since_checkpoint.to_string(),
        ),
        (
            "tailstore_replay_weight_limit",
            stats
                .log_since_checkpoint_limit
                .map_or("none".into(), |limit| limit.to_string()),
        ),
        (
            "tailstore_checkpoint_room_waits",
            stats.checkpoint_room_waits.to_string(),
        ),
        (
            "tailstore_checkpoint_room_wait_ms",
            format!("{:.3}", stats.checkpoint_room_wait_time.as_secs_f64() * 1e3),
        ),
        ("tailstore_log_commits", stats.log.commits.to_string()),
        // Commits whose record was longer than the log takes, logged in parts.
        (
            "tailstore_commits_in_parts",
            stats.commits_in_parts.to_string(),
        ),
        ("tailstore_log_flushes", stats.log.flushes.to_string()),
        ("tailstore_log_bytes", stats.log.log_bytes.to_string()),
        // Appends that found the log's ring full (its writer behind): the log device, not
        // the CPU, was the limit then.
        (
            "tailstore_log_ring_full_waits",
            stats.log.ring_full_waits.to_string(),
        ),
        (
            "tailstore_log_ring_full_wait_ms",
            format!("{:.3}", stats.log.ring_full_wait_ns as f64 / 1e6),
        ),
    ]);
    lines(&fields)
}

fn stats(shared: &Shared) -> String {
    let engine = shared.ks.database().stats();
    let tracking = shared.tracking.totals();
    let keys = shared.ks.key_stats.get();
    let (totals, rates) = (shared.totals(), shared.rates.per_second());
    let traffic = shared.traffic();
    let mut fields = vec![
        (
            "total_connections_received",
            shared
                .connections_received
                .load(Ordering::Relaxed)
                .to_string(),
        ),
        ("total_commands_processed", totals.commands.to_string()),
        ("instantaneous_ops_per_sec", format!("{:.0}", rates.ops)),
        ("total_net_input_bytes", totals.input.to_string()),
        ("total_net_output_bytes", totals.output.to_string()),
        // No replication: no replica's traffic.
        ("total_net_repl_input_bytes", "0".into()),
        ("total_net_repl_output_bytes", "0".into()),
        (
            "instantaneous_input_kbps",
            format!("{:.2}", rates.input_kbps),
        ),
        (
            "instantaneous_output_kbps",
            format!("{:.2}", rates.output_kbps),
        ),
        ("instantaneous_input_repl_kbps", "0.00".into()),
        ("instantaneous_output_repl_kbps", "0.00".into()),
        (
            "rejected_connections",
            shared.rejected.load(Ordering::Relaxed).to_string(),
        ),
        ("sync_full", "0".into()),
        ("sync_partial_ok", "0".into()),
        ("sync_partial_err", "0".into()),
        ("expired_keys", keys.expired.to_string()),
        // No eviction here: tailstore keeps every key (maxmemory 0) and every client.
        ("evicted_keys", "0".into()),
        ("evicted_clients", "0".into()),
        ("total_eviction_exceeded_time", "0".into()),
        ("current_eviction_exceeded_time", "0".into()),
        ("keyspace_hits", keys.hits.to_string()),
        ("keyspace_misses", keys.misses.to_string()),
        (
            "pubsub_channels",
            shared.pubsub.channel_count(Target::Channel).to_string(),
        ),
        ("pubsub_patterns", shared.pubsub.patterns().to_string()),
        (
            "pubsubshard_channels",
            shared.pubsub.channel_count(Target::Shard).to_string(),
        ),
    ];
    // Nothing forks, migrates, replicates or defragments here.
    fields.extend(zeros(&[
        "latest_fork_usec",
        "total_forks",
        "migrate_cached_sockets",
        "slave_expires_tracked_keys",
        "active_defrag_hits",
        "active_defrag_misses",
        "active_defrag_key_hits",
        "active_defrag_key_misses",
        "total_active_defrag_time",
        "current_active_defrag_time",
    ]));
    fields.extend([
        ("tracking_total_keys", tracking.keys.to_string()),
        ("tracking_total_items", tracking.items.to_string()),
        ("tracking_total_prefixes", tracking.prefixes.to_string()),
        // Errors of a replica's or an AOF's commands: none without either.
        ("unexpected_error_replies", "0".into()),
        (
            "total_error_replies",
            super::command_stats::total_errors(&shared.command_stats()).to_string(),
        ),
        // The times a connection's input was read and its output written.
        ("total_reads_processed", traffic.reads.to_string()),
        ("total_writes_processed", traffic.writes.to_string()),
        (
            "tailstore_blocking_runs",
            shared.blocked_runs.load(Ordering::Relaxed).to_string(),
        ),
        ("tailstore_commits", engine.commits.to_string()),
        ("tailstore_aborts", engine.total_aborts().to_string()),
        ("tailstore_pages_read", engine.pool.pages_read.to_string()),
        (
            "tailstore_pages_written",
            engine.pool.pages_written.to_string(),
        ),
        // Reads that met a writer of the same tree: a retry, or a wait on the tree's latch.
        (
            "tailstore_read_retries",
            engine.read_contention.retries.to_string(),
        ),
        (
            "tailstore_read_latched",
            engine.read_contention.latched.to_string(),
        ),
    ]);
    lines(&fields)
}

/// A primary without replicas (replication is not implemented), as Redis reports one.
fn replication(shared: &Shared) -> String {
    lines(&[
        ("role", "master".into()),
        ("connected_slaves", "0".into()),
        ("master_failover_state", "no-failover".into()),
        ("master_replid", shared.replication_id.clone()),
        ("master_replid2", "0".repeat(40)),
        ("master_repl_offset", "0".into()),
        ("second_repl_offset", "-1".into()),
        ("repl_backlog_active", "0".into()),
        // The setting (CONFIG GET repl-backlog-size); no backlog is kept.
        ("repl_backlog_size", "1048576".into()),
        ("repl_backlog_first_byte_offset", "0".into()),
        ("repl_backlog_histlen", "0".into()),
    ])
}

/// The process's CPU time in seconds, system and user, its own and its children's (none:
/// nothing forks), from /proc/self/stat at the clock's tick. Redis's `…_main_thread`
/// fields are left out: no one thread here does what Redis's main thread does.
fn cpu(_shared: &Shared) -> String {
    let ticks = process_cpu_ticks().unwrap_or_default();
    let per_second = rustix::param::clock_ticks_per_second().max(1) as f64;
    let seconds = |ticks: u64| format!("{:.6}", ticks as f64 / per_second);
    lines(&[
        ("used_cpu_sys", seconds(ticks.system)),
        ("used_cpu_user", seconds(ticks.user)),
        ("used_cpu_sys_children", seconds(ticks.children_system)),
        ("used_cpu_user_children", seconds(ticks.children_user)),
    ])
}

/// CPU time in clock ticks, from /proc/self/stat.
#[derive(Default)]
struct CpuTicks {
    user: u64,
    system: u64,
    children_user: u64,
    children_system: u64,
}

fn process_cpu_ticks() -> Option<CpuTicks> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name, field 2, is in parentheses and may hold spaces: count from after
    // it (the state, field 3, comes first; utime is field 14).
    let after_name = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<u64> = after_name
        .split_whitespace()
        .skip(11)
        .take(4)
        .map(|field| field.parse().ok())
        .collect::<Option<_>>()?;
    let [user, system, children_user, children_system] = fields[..] else {
        return None;
    };
    Some(CpuTicks {
        user,
        system,
        children_user,
        children_system,
    })
}

/// The machine's memory in bytes (MemTotal in /proc/meminfo).
fn system_memory() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    Some(crate::command::memory::kib_field(&meminfo, "MemTotal:")? * 1024)
}

fn keyspace(shared: &Shared) -> String {
    let mut out = String::new();
    for db in 0..shared.ks.databases() {
        match shared.ks.count_keys(db) {
            Ok((0, _)) => {}
            // avg_ttl: no estimate (design/kv.md, `kv_counts`), as Redis says before it has one.
            Ok((keys, expires)) => out.push_str(&format!(
                "db{db}:keys={keys},expires={expires},avg_ttl=0\r\n"
            )),
            Err(err) => out.push_str(&format!("db{db}:error={err}\r\n")),
        }
    }
    out
}
