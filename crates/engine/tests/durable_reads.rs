//! A read-only transaction's commit waits for the durability of every change it could have
//! read (storage.md, early lock release). Records are reserved in order but finish out of
//! order: a later commit's record is published (parked behind an earlier one still being
//! written), its pages stamped and its locks released, so its changes are readable while the
//! log's filled prefix still ends below it. Waiting for that prefix acknowledged a read of a
//! change a crash could still take back.

mod support;

use tailstore_log::append_pauses::hold_next_append;
use tailstore_log::CommitMode;
use tailstore_media::sim::SimStorage;

use support::{items_schema, key, open_sim, sim_config, Item};

#[test]
fn a_read_only_commit_waits_for_a_change_published_behind_an_unfinished_record() {
    let storage = SimStorage::new();
    let (db, _) = open_sim(&storage, &sim_config(CommitMode::Fsync, 256)).expect("open");
    let (a, b) = (
        db.create_table("a", &items_schema()).expect("a"),
        db.create_table("b", &items_schema()).expect("b"),
    );
    let held = hold_next_append();
    std::thread::scope(|scope| {
        let first = scope.spawn(|| {
            let mut txn = db.begin();
            txn.insert(&a, &Item::new(1, 0, 1, 8).values())?;
            txn.commit()
        });
        held.wait_reserved();
        let mut writer = db.begin();
        writer
            .insert(&b, &Item::new(1, 0, 2, 8).values())
            .expect("insert");
        let written = writer
            .commit_pending()
            .expect("a commit behind the held one");
        let mut reader = db.begin();
        let seen = reader.get(&b, &key(1)).expect("read");
        assert!(seen.is_some(), "the later commit's row is readable");
        let read = reader.commit_pending().expect("the read-only commit");
        let (read_lsn, written_lsn) = (read.lsn(), written.lsn());
        held.release();
        first.join().expect("first").expect("the held commit");
        written.wait().expect("durable");
        read.wait().expect("durable");
        assert!(
            read_lsn >= written_lsn,
            "a read-only commit waits for LSN {read_lsn}, below {written_lsn}, the end of the \
             record whose change it read"
        );
    });
}
