//! INFO as monitoring reads it: the sections in Redis 7.0's order under its titles, every
//! field a real `redis-server` reports (besides those below, which describe Redis's own
//! insides), and values that are true of tailstore: a primary without replicas, no
//! cluster, saves counted and timed, CPU time that grows, one run id per run. Without a
//! `redis-server` on the PATH the comparison with Redis prints that it is skipped.

mod support;

use std::collections::BTreeSet;

use support::real_redis::Servers;
use support::{client_at, q, TestServer};

/// Redis's fields tailstore leaves out, with why: each describes something Redis has and
/// tailstore has not, or a count tailstore does not keep.
const LEFT_OUT: &[(&str, &str)] = &[
    ("atomicvar_api", "C's atomics library"),
    ("gcc_version", "the C compiler"),
    ("redis_build_id", "Redis's build"),
    ("lru_clock", "no LRU clock: nothing is evicted"),
    ("client_recent_max_input_buffer", "not tracked"),
    ("client_recent_max_output_buffer", "not tracked"),
    ("clients_in_timeout_table", "not tracked"),
    ("allocator_active", "jemalloc's statistics"),
    ("allocator_allocated", "jemalloc's statistics"),
    ("allocator_frag_bytes", "jemalloc's statistics"),
    ("allocator_frag_ratio", "jemalloc's statistics"),
    ("allocator_resident", "jemalloc's statistics"),
    ("allocator_rss_bytes", "jemalloc's statistics"),
    ("allocator_rss_ratio", "jemalloc's statistics"),
    ("mem_allocator", "the binary's choice, not the library's"),
    ("active_defrag_running", "no defragmentation"),
    (
        "mem_fragmentation_bytes",
        "used_memory is the page pool, not the keys",
    ),
    (
        "mem_fragmentation_ratio",
        "used_memory is the page pool, not the keys",
    ),
    ("rss_overhead_bytes", "jemalloc's statistics"),
    ("rss_overhead_ratio", "jemalloc's statistics"),
    ("mem_not_counted_for_evict", "no eviction"),
    ("mem_replication_backlog", "no replication"),
    ("mem_total_replication_buffers", "no replication"),
    ("mem_clients_slaves", "no replication"),
    ("mem_clients_normal", "not tracked"),
    ("mem_cluster_links", "no cluster"),
    ("mem_aof_buffer", "no AOF: the log is the engine's"),
    ("used_memory_dataset", "the keys live in the engine's pages"),
    (
        "used_memory_dataset_perc",
        "the keys live in the engine's pages",
    ),
    (
        "used_memory_overhead",
        "the keys live in the engine's pages",
    ),
    ("used_memory_startup", "the keys live in the engine's pages"),
    ("used_memory_peak_perc", "the pool is allocated whole"),
    (
        "used_memory_lua",
        "one Lua state per event loop, not measured",
    ),
    (
        "used_memory_lua_human",
        "one Lua state per event loop, not measured",
    ),
    (
        "used_memory_vm_eval",
        "one Lua state per event loop, not measured",
    ),
    (
        "used_memory_vm_functions",
        "one Lua state per event loop, not measured",
    ),
    (
        "used_memory_vm_total",
        "one Lua state per event loop, not measured",
    ),
    (
        "used_memory_vm_total_human",
        "one Lua state per event loop, not measured",
    ),
    ("used_memory_scripts", "not measured"),
    ("used_memory_scripts_eval", "not measured"),
    ("used_memory_scripts_human", "not measured"),
    ("used_memory_functions", "not measured"),
    (
        "rdb_last_load_keys_expired",
        "a restart replays the log, it loads no keys",
    ),
    (
        "rdb_last_load_keys_loaded",
        "a restart replays the log, it loads no keys",
    ),
    ("expired_stale_perc", "the active expiry keeps no estimate"),
    (
        "expired_time_cap_reached_count",
        "the active expiry has no time cap",
    ),
    ("expire_cycle_cpu_milliseconds", "not tracked"),
    (
        "dump_payload_sanitizations",
        "RESTORE always checks its payload whole",
    ),
    (
        "io_threaded_reads_processed",
        "no I/O threads: each event loop reads its own",
    ),
    (
        "io_threaded_writes_processed",
        "no I/O threads: each event loop writes its own",
    ),
    ("reply_buffer_shrinks", "Redis's reply buffers"),
    ("reply_buffer_expands", "Redis's reply buffers"),
    (
        "used_cpu_sys_main_thread",
        "no main thread: the event loops are peers",
    ),
    (
        "used_cpu_user_main_thread",
        "no main thread: the event loops are peers",
    ),
];

/// The section titles and the field names of `INFO everything`, with the data-dependent
/// lines (per command, per error, per database) left out.
fn titles_and_fields(con: &mut redis::Connection) -> (Vec<String>, BTreeSet<String>) {
    let text: String = q(con, &["INFO", "everything"]);
    let titles = text
        .lines()
        .filter_map(|line| line.strip_prefix("# "))
        .map(str::to_string)
        .collect();
    let fields = text
        .lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .filter_map(|line| line.split_once(':').map(|(name, _)| name.to_string()))
        .filter(|name| {
            !["cmdstat_", "errorstat_", "latency_percentiles_usec_", "db"]
                .iter()
                .any(|prefix| name.starts_with(prefix))
        })
        .collect();
    (titles, fields)
}

#[test]
fn info_has_redis_sections_in_its_order_and_every_field_not_left_out_on_purpose() {
    let Some(servers) = Servers::start(
        "info_has_redis_sections_in_its_order_and_every_field_not_left_out_on_purpose",
    ) else {
        return;
    };
    let (redis_titles, redis_fields) = titles_and_fields(&mut client_at(servers.redis.address()));
    let (titles, fields) = titles_and_fields(&mut servers.tailstore.client());
    assert_eq!(titles, redis_titles);
    let left_out: BTreeSet<String> = LEFT_OUT.iter().map(|(name, _)| name.to_string()).collect();
    let missing: Vec<&String> = redis_fields
        .difference(&fields)
        .filter(|name| !left_out.contains(*name))
        .collect();
    assert!(missing.is_empty(), "INFO lacks Redis's {missing:?}");
    // A field left out on purpose that is reported after all belongs off the list.
    let listed_but_reported: Vec<&String> = left_out.intersection(&fields).collect();
    assert!(listed_but_reported.is_empty(), "{listed_but_reported:?}");
    let extra: Vec<&String> = fields
        .difference(&redis_fields)
        .filter(|name| !name.starts_with("tailstore_"))
        .collect();
    assert!(extra.is_empty(), "fields Redis does not report: {extra:?}");
}

/// `field`'s value in an INFO reply.
fn field(info: &str, name: &str) -> String {
    info.lines()
        .find_map(|line| line.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("INFO has no {name}"))
        .to_string()
}

#[test]
fn info_tells_the_truth_about_replication_saves_cpu_the_traffic_and_the_run() {
    let server = TestServer::start();
    let mut con = server.client();
    let before: String = q(&mut con, &["INFO"]);
    assert_eq!(field(&before, "role"), "master");
    assert_eq!(field(&before, "connected_slaves"), "0");
    assert_eq!(field(&before, "cluster_enabled"), "0");
    assert_eq!(field(&before, "rdb_saves"), "0");
    assert_eq!(field(&before, "aof_rewrites"), "0");
    let run_id = field(&before, "run_id");
    assert_eq!(run_id.len(), 40);
    assert!(run_id.bytes().all(|b| b.is_ascii_hexdigit()), "{run_id}");
    assert_ne!(run_id, field(&before, "master_replid"));

    let _: String = q(&mut con, &["BGSAVE"]);
    let _: () = q(&mut con, &["SAVE"]);
    let _: String = q(&mut con, &["BGREWRITEAOF"]);
    // CPU time to measure: a few thousand commands.
    for n in 0..3000 {
        let _: () = q(&mut con, &["SET", &format!("k{n}"), "v"]);
    }
    let after: String = q(&mut con, &["INFO"]);
    assert_eq!(field(&after, "rdb_saves"), "2");
    assert_eq!(field(&after, "rdb_last_bgsave_status"), "ok");
    assert_eq!(field(&after, "rdb_bgsave_in_progress"), "0");
    assert_eq!(field(&after, "aof_rewrites"), "1");
    assert_eq!(field(&after, "aof_last_bgrewrite_status"), "ok");
    let lastsave: i64 = q(&mut con, &["LASTSAVE"]);
    assert_eq!(field(&after, "rdb_last_save_time"), lastsave.to_string());
    assert_eq!(field(&after, "run_id"), run_id, "one run id per run");
    let cpu = |info: &str| -> f64 {
        ["used_cpu_sys", "used_cpu_user"]
            .iter()
            .map(|name| field(info, name).parse::<f64>().expect("seconds"))
            .sum()
    };
    assert!(
        cpu(&after) > cpu(&before),
        "{} then {}",
        cpu(&before),
        cpu(&after)
    );
    assert!(
        field(&after, "total_system_memory")
            .parse::<u64>()
            .expect("bytes")
            > 0
    );
    // Each of the 3,004 commands sent after the first INFO (the second included) was at
    // least one read of the connection, and each reply after the first INFO's (its own
    // included) one write; a pipeline of 100 commands sent at once takes far fewer reads.
    let count = |info: &str, name: &str| field(info, name).parse::<u64>().expect("a count");
    for name in ["total_reads_processed", "total_writes_processed"] {
        let grown = count(&after, name) - count(&before, name);
        assert!((3004..3100).contains(&grown), "{name} grew by {grown}");
    }
    let mut pipeline = redis::pipe();
    for n in 0..100 {
        pipeline.cmd("GET").arg(format!("k{n}"));
    }
    let _: Vec<String> = pipeline.query(&mut con).expect("the pipeline");
    let piped: String = q(&mut con, &["INFO"]);
    let grown = count(&piped, "total_reads_processed") - count(&after, "total_reads_processed");
    assert!(
        (1..20).contains(&grown),
        "100 pipelined commands read {grown} times"
    );
}
