//! The lazy free's queue: a deleted key too large to free in its own transaction waits
//! there, INFO counts it (`lazyfree_pending_objects`), and the background batches empty it;
//! INFO counts the keys they finished freeing (`lazyfreed_objects`).
//! Run on a keyspace without a server, so that no background task frees anything between
//! the steps.

mod support;

use std::sync::Arc;

use support::{open_sim_database, run_on};
use tailstore_kv::keyspace::Keyspace;
use tailstore_log::CommitMode;
use tailstore_media::sim::SimStorage;
use tailstore_resp::Reply;

/// A keyspace on a simulated store holding `list`, of 300 elements: more than a delete
/// frees in its own transaction.
fn keyspace_with_a_large_list() -> Keyspace {
    let db = open_sim_database(CommitMode::Buffer, &SimStorage::new());
    let ks = Keyspace::open(Arc::new(db), 16).expect("open the keyspace");
    let elements: Vec<String> = (0..300).map(|i| format!("e{i}")).collect();
    let mut rpush = vec!["RPUSH", "list"];
    rpush.extend(elements.iter().map(String::as_str));
    assert_eq!(run_on(&ks, &rpush), Reply::Int(300));
    ks
}

#[test]
fn a_large_deleted_key_waits_in_the_queue_until_the_batches_free_it() {
    let ks = keyspace_with_a_large_list();
    run_on(&ks, &["RPUSH", "small", "a", "b"]);
    assert_eq!(ks.lazyfree_pending(), Ok(0));

    assert_eq!(run_on(&ks, &["DEL", "list", "small"]), Reply::Int(2));
    assert_eq!(
        ks.lazyfree_pending(),
        Ok(1),
        "300 elements wait, 2 were freed at once"
    );
    let mut batches = 0;
    while ks.free_garbage().expect("a batch") > 0 {
        batches += 1;
        assert!(batches < 10, "the queue does not empty");
    }
    assert_eq!(ks.lazyfree_pending(), Ok(0));
    assert_eq!(
        ks.key_stats.get().lazyfreed,
        1,
        "the large list, freed by the batches"
    );
}

/// Each key of a flushed database counts once it is freed: a small one when the flush's
/// batch removes it, a large one when its queued elements are gone.
#[test]
fn a_flushed_databases_keys_count_once_each_when_freed() {
    let ks = keyspace_with_a_large_list();
    for key in ["a", "b", "c"] {
        run_on(&ks, &["SET", key, "v"]);
    }
    ks.flush(None).expect("FLUSHALL").wait().expect("durable");
    let mut rounds = 0;
    while ks.free_garbage().expect("a batch") + ks.free_flushed().expect("a batch") > 0 {
        rounds += 1;
        assert!(rounds < 20, "the flushed keys are never freed");
    }
    assert_eq!(ks.lazyfree_pending(), Ok(0));
    assert_eq!(ks.key_stats.get().lazyfreed, 4);
    ks.key_stats.reset();
    assert_eq!(ks.key_stats.get().lazyfreed, 0, "CONFIG RESETSTAT");
}
