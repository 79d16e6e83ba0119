//! MULTI/EXEC blocks of several clients at once, checked for serializability with the
//! list-append workload of Jepsen's Elle (Kingsbury and Alvaro, VLDB 2020): each block appends
//! unique elements to some lists (RPUSH) and reads others whole (LRANGE). A list only grows,
//! so its final contents give the order of every append, each read must be a prefix of it,
//! and RPUSH's reply (the new length) tells where its element went. From these the test
//! builds the dependency graph of the blocks and fails on a cycle: an EXEC block is one
//! engine transaction, so the blocks must behave as if run one at a time. Some blocks are
//! optimistic (WATCH, a read outside the block, then the block): one that runs must behave
//! as if its outside read were part of it.

mod support;

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::Value;
use support::{raw_value, Options, TestServer};
use tailstore_history::DependencyGraph;

const LISTS: usize = 5;
const CLIENTS: i64 = 4;
const BLOCKS_PER_CLIENT: i64 = 400;
/// Operations per block at most; an element is `block * 10 + op`, so under 10.
const MAX_OPS: i64 = 4;

#[derive(Debug)]
enum Op {
    Append { list: usize, element: i64 },
    Read { list: usize },
}

/// A block as it ran: its operations and their replies.
#[derive(Debug)]
struct Block {
    id: i64,
    ops: Vec<(Op, Value)>,
}

fn list_name(list: usize) -> String {
    format!("list{list}")
}

fn block_of(element: i64) -> i64 {
    element / 10
}

fn integers(reply: &Value) -> Vec<i64> {
    let Value::Array(items) = reply else {
        panic!("LRANGE answered {reply:?}");
    };
    items
        .iter()
        .map(|item| match item {
            Value::BulkString(bytes) => std::str::from_utf8(bytes)
                .ok()
                .and_then(|text| text.parse().ok())
                .unwrap_or_else(|| panic!("not an element: {item:?}")),
            other => panic!("not an element: {other:?}"),
        })
        .collect()
}

/// One client's blocks that ran, each of 1..=MAX_OPS random appends and reads; a third of
/// them optimistic: WATCH a list, read it outside the block, then the block (which runs only
/// if the list did not change, and then counts the read as its first operation).
fn run_client(server: &TestServer, client: i64) -> Vec<Block> {
    let mut connection = server.client();
    let mut rng = StdRng::seed_from_u64(client as u64 + 1);
    (0..BLOCKS_PER_CLIENT)
        .filter_map(|b| {
            let id = 1 + client * BLOCKS_PER_CLIENT + b;
            let watched = rng.gen_ratio(1, 3).then(|| {
                let list = rng.gen_range(0..LISTS);
                assert_eq!(
                    raw_value(&mut connection, &["WATCH", &list_name(list)]),
                    Value::Okay
                );
                let read = raw_value(&mut connection, &["LRANGE", &list_name(list), "0", "-1"]);
                (Op::Read { list }, read)
            });
            let ops: Vec<Op> = (0..rng.gen_range(1..=MAX_OPS))
                .map(|n| {
                    let list = rng.gen_range(0..LISTS);
                    if rng.gen_bool(0.5) {
                        Op::Append {
                            list,
                            element: id * 10 + n,
                        }
                    } else {
                        Op::Read { list }
                    }
                })
                .collect();
            assert_eq!(raw_value(&mut connection, &["MULTI"]), Value::Okay);
            for op in &ops {
                let queued = match op {
                    Op::Append { list, element } => raw_value(
                        &mut connection,
                        &["RPUSH", &list_name(*list), &element.to_string()],
                    ),
                    Op::Read { list } => {
                        raw_value(&mut connection, &["LRANGE", &list_name(*list), "0", "-1"])
                    }
                };
                assert_eq!(queued, Value::SimpleString("QUEUED".into()));
            }
            let replies = match raw_value(&mut connection, &["EXEC"]) {
                Value::Array(replies) => replies,
                Value::Nil if watched.is_some() => return None, // the watched list changed
                other => panic!("block {id}: EXEC answered {other:?}"),
            };
            assert_eq!(replies.len(), ops.len(), "block {id}");
            Some(Block {
                id,
                ops: watched
                    .into_iter()
                    .chain(ops.into_iter().zip(replies))
                    .collect(),
            })
        })
        .collect()
}

/// Where a block found each list it touched (the length before its first operation on it),
/// checking that what it saw of the list agrees with the final contents and with its own
/// appends: reads are prefixes, its appends sit together right after that length.
fn starting_lengths(block: &Block, finals: &[Vec<i64>]) -> BTreeMap<usize, usize> {
    let mut seen: BTreeMap<usize, (usize, usize)> = BTreeMap::new(); // list -> (start, own)
    for (op, reply) in &block.ops {
        match op {
            Op::Read { list } => {
                let read = integers(reply);
                let (start, own) = *seen.entry(*list).or_insert((read.len(), 0));
                assert_eq!(
                    read.len(),
                    start + own,
                    "block {}: a read of list {list} after its own appends",
                    block.id
                );
                assert_eq!(
                    read[..],
                    finals[*list][..read.len()],
                    "block {}: a read of list {list} is not a prefix of its final contents",
                    block.id
                );
            }
            Op::Append { list, element } => {
                let Value::Int(length) = reply else {
                    panic!("block {}: RPUSH answered {reply:?}", block.id);
                };
                let at = usize::try_from(*length).expect("a length") - 1;
                let (start, own) = seen.entry(*list).or_insert((at, 0));
                assert_eq!(
                    at,
                    *start + *own,
                    "block {}: its appends to list {list} are not together",
                    block.id
                );
                assert_eq!(
                    finals[*list].get(at),
                    Some(element),
                    "block {}: element {element} is not where RPUSH put it",
                    block.id
                );
                *own += 1;
            }
        }
    }
    seen.into_iter()
        .map(|(list, (start, _))| (list, start))
        .collect()
}

/// The dependency graph of the blocks: appends in list order (write-write), a block after
/// the writer of the last element it found (write-read) and before the writer of the next
/// one (read-write). Starting at length `s` is a read of the first `s` elements, for a
/// block that only appended too: RPUSH's reply told it the length.
fn dependency_graph(blocks: &[Block], finals: &[Vec<i64>]) -> DependencyGraph {
    let mut graph = DependencyGraph::new();
    for list in finals {
        for pair in list.windows(2) {
            graph.edge(block_of(pair[0]), block_of(pair[1]));
        }
    }
    for block in blocks {
        graph.node(block.id);
        for (list, start) in starting_lengths(block, finals) {
            let elements = &finals[list];
            if start > 0 {
                graph.edge(block_of(elements[start - 1]), block.id);
            }
            if let Some(&next) = elements.get(start) {
                graph.edge(block.id, block_of(next));
            }
        }
    }
    graph
}

#[test]
fn exec_blocks_of_appends_and_reads_are_serializable() {
    let server = TestServer::with(Options {
        threads: 2,
        ..Options::default()
    });
    let blocks: Vec<Block> = std::thread::scope(|s| {
        let clients: Vec<_> = (0..CLIENTS)
            .map(|client| {
                let server = &server;
                s.spawn(move || run_client(server, client))
            })
            .collect();
        clients
            .into_iter()
            .flat_map(|c| c.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    let mut connection = server.client();
    let finals: Vec<Vec<i64>> = (0..LISTS)
        .map(|list| {
            integers(&raw_value(
                &mut connection,
                &["LRANGE", &list_name(list), "0", "-1"],
            ))
        })
        .collect();
    // Every append is in its list exactly once, and nothing else is.
    let mut appended: Vec<i64> = blocks
        .iter()
        .flat_map(|b| &b.ops)
        .filter_map(|(op, _)| match op {
            Op::Append { element, .. } => Some(*element),
            Op::Read { .. } => None,
        })
        .collect();
    let mut stored: Vec<i64> = finals.iter().flatten().copied().collect();
    appended.sort_unstable();
    stored.sort_unstable();
    assert_eq!(
        stored, appended,
        "the lists hold exactly the appended elements"
    );
    if let Some(cycle) = dependency_graph(&blocks, &finals).cycle() {
        let on_it: Vec<&Block> = blocks.iter().filter(|b| cycle.contains(&b.id)).collect();
        panic!("EXEC blocks not serializable: the dependency cycle {cycle:?}, of {on_it:?}");
    }
}
