//! INFO's sections, in Redis's `field:value` form, plus tailstore's own durability fields.

use std::sync::atomic::Ordering;

use tailstore_engine::RestartRedo;

use super::admin::REDIS_VERSION;
use super::pubsub::Target;
use super::Shared;

/// (section name, body) in Redis's order.
pub fn sections(shared: &Shared) -> Vec<(&'static str, String)> {
    vec![
        ("server", server(shared)),
        ("clients", clients(shared)),
        ("memory", memory(shared)),
        ("persistence", persistence(shared)),
        ("stats", stats(shared)),
        ("keyspace", keyspace(shared)),
    ]
}

fn lines(fields: &[(&str, String)]) -> String {
    fields.iter().map(|(k, v)| format!("{k}:{v}\r\n")).collect()
}

fn server(shared: &Shared) -> String {
    let uptime = shared.started.elapsed().as_secs();
    lines(&[
        ("redis_version", REDIS_VERSION.into()),
        ("tailstore_version", env!("CARGO_PKG_VERSION").into()),
        ("redis_mode", "standalone".into()),
        ("os", std::env::consts::OS.into()),
        ("arch_bits", (usize::BITS).to_string()),
        ("process_id", std::process::id().to_string()),
        (
            "tcp_port",
            super::admin::port(shared.config.plain_address()),
        ),
        ("uptime_in_seconds", uptime.to_string()),
        ("uptime_in_days", (uptime / 86_400).to_string()),
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
    let megabytes = |bytes: u64| format!("{:.2}M", bytes as f64 / 1048576.0);
    lines(&[
        ("used_memory", pool_bytes.to_string()),
        ("used_memory_human", megabytes(pool_bytes)),
        ("used_memory_rss", resident.to_string()),
        ("used_memory_rss_human", megabytes(resident)),
        ("maxmemory", "0".into()),
        ("maxmemory_policy", "noeviction".into()),
        ("number_of_cached_scripts", shared.scripts.len().to_string()),
        ("number_of_functions", functions.to_string()),
        ("number_of_libraries", libraries.to_string()),
        (
            "lazyfree_pending_objects",
            shared.ks.lazyfree_pending().unwrap_or(0).to_string(),
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
    lines(&[
        ("loading", "0".into()),
        ("rdb_changes_since_last_save", "0".into()),
        (
            "rdb_last_save_time",
            shared.last_save.load(Ordering::Relaxed).to_string(),
        ),
        ("aof_enabled", u8::from(config.durable_replies).to_string()),
        // `err` once the database stopped after a failed write, sync or flush (fail-stop):
        // Redis's field for a failing AOF, which monitoring already watches.
        (
            "aof_last_write_status",
            match shared.ks.database().check_running() {
                Ok(()) => "ok",
                Err(_) => "err",
            }
            .into(),
        ),
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
    ])
}

fn stats(shared: &Shared) -> String {
    let engine = shared.ks.database().stats();
    let tracking = shared.tracking.totals();
    let keys = shared.ks.key_stats.get();
    let (totals, rates) = (shared.totals(), shared.rates.per_second());
    lines(&[
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
        (
            "instantaneous_input_kbps",
            format!("{:.2}", rates.input_kbps),
        ),
        (
            "instantaneous_output_kbps",
            format!("{:.2}", rates.output_kbps),
        ),
        (
            "rejected_connections",
            shared.rejected.load(Ordering::Relaxed).to_string(),
        ),
        ("expired_keys", keys.expired.to_string()),
        // No eviction here: tailstore keeps every key (maxmemory 0).
        ("evicted_keys", "0".to_string()),
        ("keyspace_hits", keys.hits.to_string()),
        ("keyspace_misses", keys.misses.to_string()),
        (
            "tailstore_blocking_runs",
            shared.blocked_runs.load(Ordering::Relaxed).to_string(),
        ),
        (
            "total_error_replies",
            super::command_stats::total_errors(&shared.command_stats()).to_string(),
        ),
        (
            "pubsub_channels",
            shared.pubsub.channel_count(Target::Channel).to_string(),
        ),
        ("pubsub_patterns", shared.pubsub.patterns().to_string()),
        (
            "pubsubshard_channels",
            shared.pubsub.channel_count(Target::Shard).to_string(),
        ),
        ("tracking_total_keys", tracking.keys.to_string()),
        ("tracking_total_items", tracking.items.to_string()),
        ("tracking_total_prefixes", tracking.prefixes.to_string()),
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
    ])
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
