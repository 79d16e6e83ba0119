use proptest::prelude::*;

use super::*;

fn hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}

fn texts(items: &[&str]) -> Vec<Vec<u8>> {
    items.iter().map(|s| s.as_bytes().to_vec()).collect()
}

/// Payloads that redis-server 7.0.15 returned to DUMP (captured 2026-12-04), with what
/// they hold: each of its encodings of a small value.
#[test]
fn redis_7_payloads_restore() {
    let cases = [
        // SET int 12345: an integer-encoded string.
        ("00c139300a009d94ea2793fc08b9", Object::String(b"12345".to_vec())),
        ("00c0f90a005e26d130d7a242ab", Object::String(b"-7".to_vec())),
        ("000568656c6c6f0a006372df766534200a", Object::String(b"hello".to_vec())),
        // 100 × "a": LZF.
        (
            "00c3094064016161e057000161610a00e8a3b507b06df271",
            Object::String(vec![b'a'; 100]),
        ),
        // HSET hlp a 1 b hello c -300000: a listpack hash.
        (
            "101e1e000000060081610201018162028568656c6c6f06816302f2206cfb04ff0a001e8d37ef75bad05d",
            Object::Hash(vec![
                (b"a".to_vec(), b"1".to_vec()),
                (b"b".to_vec(), b"hello".to_vec()),
                (b"c".to_vec(), b"-300000".to_vec()),
            ]),
        ),
        // ZADD zlp 1.5 x 2 y -3 z: a listpack sorted set, in score order.
        (
            "111a1a0000000600817a02dffd0281780283312e35048179020201ff0a00b3952ecceb8e9858",
            Object::ZSet(vec![
                (b"z".to_vec(), -3.0),
                (b"x".to_vec(), 1.5),
                (b"y".to_vec(), 2.0),
            ]),
        ),
        // SADD iset 1 2 300 -70000 5000000000: an intset of 64-bit integers, LZF-compressed.
        (
            "0bc3273004080000000520030390eefeff40000001200b4000000240042000002cc01002f2052a200a00000a0017901f7fc8e6119b",
            Object::Set(texts(&["-70000", "1", "2", "300", "5000000000"])),
        ),
        // RPUSH qlist a b 1 -20 70000 "hello world": a quicklist of one listpack node.
        (
            "120102242400000006008161028162020101dfec02f2701101048b68656c6c6f20776f726c640cff0a0095b1ecf83aff3024",
            Object::List(texts(&["a", "b", "1", "-20", "70000", "hello world"])),
        ),
        // SADD sset x y z: a plain set (7.0 keeps small sets of strings in a hash table).
        ("0203017a017901780a00a2117a196f6ea3e5", Object::Set(texts(&["z", "y", "x"]))),
    ];
    for (payload, expected) in cases {
        assert_eq!(restore(&hex(payload)), Ok(expected), "{payload}");
    }
}

/// A stream redis-server 7.0.15 returned to DUMP (type 19): four entries added, the second
/// deleted (it stays in the node, marked), a group with two entries pending for one
/// consumer and a second consumer with none.
const REDIS_7_STREAM: &str = concat!(
    "13011000000000000000010000000000000001404b4b0000001f00030101010201816102816202000102",
    "010001000101010201050103010001010103010401050100010101dfff020101816302050106010201",
    "020106018178028179020501ff0303070101010204010167020081ffffffffffffffff020000000000",
    "00000100000000000000015e58e441a201000001000000000000000200000000000000005e58e441a2",
    "010000010205616c6963655e58e441a20100000200000000000000010000000000000001000000000000",
    "0002000000000000000003626f625e58e441a2010000000a00deb15da561b0047b",
);

/// [`REDIS_7_STREAM`] restores with its entries, groups and the counts as Redis wrote them.
#[test]
fn a_redis_7_stream_restores() {
    let payload = hex(REDIS_7_STREAM);
    let id = |ms, seq| StreamId { ms, seq };
    let seen = 1_796_401_813_598;
    let pending = |ms, seq| PendingEntry {
        id: id(ms, seq),
        consumer: b"alice".to_vec(),
        delivered_at: seen,
        deliveries: 1,
    };
    let expected = Stream {
        entries: vec![
            StreamEntry {
                id: id(1, 1),
                fields: texts(&["a", "1", "b", "2"]),
            },
            StreamEntry {
                id: id(2, 0),
                fields: texts(&["c", "5"]),
            },
            StreamEntry {
                id: id(3, 7),
                fields: texts(&["a", "x", "b", "y"]),
            },
        ],
        last_id: id(3, 7),
        counts: Some(StreamCounts {
            entries_added: 4,
            max_deleted: id(1, 2),
        }),
        groups: vec![Group {
            name: b"g".to_vec(),
            last_id: id(2, 0),
            entries_read: Some(-1), // not known after the deletion
            pending: vec![pending(1, 1), pending(2, 0)],
            consumers: vec![
                Consumer {
                    name: b"alice".to_vec(),
                    seen_at: seen,
                },
                Consumer {
                    name: b"bob".to_vec(),
                    seen_at: seen,
                },
            ],
        }],
    };
    assert_eq!(restore(&payload), Ok(Object::Stream(expected)));
}

/// A stream with counts is written as type 19 in a payload of Redis 7.0's version, which
/// Redis 6 refuses; one without as type 15 in Redis 6's, which every Redis since reads.
#[test]
fn a_stream_is_written_as_type_19_only_with_its_counts() {
    let Ok(Object::Stream(with_counts)) = restore(&hex(REDIS_7_STREAM)) else {
        panic!("Redis 7.0's stream payload");
    };
    let mut without = with_counts.clone();
    without.counts = None;
    without
        .groups
        .iter_mut()
        .for_each(|g| g.entries_read = None);
    for (stream, kind, version) in [
        (with_counts, code::STREAM_LISTPACKS_2, STREAM_COUNTS_VERSION),
        (without, code::STREAM_LISTPACKS, DUMP_VERSION),
    ] {
        let payload = dump(&Object::Stream(stream.clone()));
        assert_eq!(payload[0], kind);
        let footer = &payload[payload.len() - FOOTER..][..2];
        assert_eq!(u16::from_le_bytes([footer[0], footer[1]]), version);
        assert_eq!(restore(&payload), Ok(Object::Stream(stream)));
    }
}

fn framed(body: &[u8], version: u16) -> Vec<u8> {
    frame(body.to_vec(), version)
}

#[test]
fn a_payload_of_a_newer_version_or_a_wrong_checksum_is_refused() {
    let good = dump(&Object::String(b"v".to_vec()));
    assert!(restore(&good).is_ok());
    let body = &good[..good.len() - FOOTER];
    assert!(restore(&framed(body, NEWEST_VERSION)).is_ok());
    assert_eq!(
        restore(&framed(body, NEWEST_VERSION + 1)),
        Err(RdbError::VersionOrChecksum)
    );
    let mut flipped = good.clone();
    flipped[2] ^= 1;
    assert_eq!(restore(&flipped), Err(RdbError::VersionOrChecksum));
    assert_eq!(restore(&good[..9]), Err(RdbError::VersionOrChecksum));
    assert_eq!(
        restore(&framed(&[], DUMP_VERSION)),
        Err(bad("the value runs past the payload's end"))
    );
}

#[test]
fn values_redis_refuses_are_refused() {
    let cases: [(&[u8], &str); 8] = [
        (&[code::LIST, 0], "an empty collection"),
        (&[code::SET, 2, 1, b'a', 1, b'a'], "a set member twice"),
        (
            &[code::HASH, 2, 1, b'f', 0, 1, b'f', 0],
            "a hash field twice",
        ),
        (&[code::ZSET, 1, 1, b'm', 253], "a NaN score"),
        (
            &[code::ZSET, 1, 1, b'm', 2, b'x', b'y'],
            "a score that is not a number",
        ),
        (&[code::STRING, 1, b'a', b'b'], "bytes after the value"),
        (
            &[code::LIST, 0x81, 0xff, 0, 0, 0, 0, 0, 0, 0],
            "a count larger than the payload holds",
        ),
        (&[code::HASH, 0x3f], "a count larger than the payload holds"),
    ];
    for (body, why) in cases {
        assert_eq!(
            restore(&framed(body, DUMP_VERSION)),
            Err(bad(why)),
            "{body:?}"
        );
    }
    for (code, what) in [
        (code::MODULE_2, "a module's value"),
        (
            code::HASH_ZIPMAP,
            "a zipmap hash (written by Redis before 2.6)",
        ),
    ] {
        assert_eq!(
            restore(&framed(&[code, 0], DUMP_VERSION)),
            Err(RdbError::Unsupported(what))
        );
    }
}

#[test]
fn old_scores_as_text_and_quicklists_of_both_containers_restore() {
    let zset = [
        &[code::ZSET, 3][..],
        &[1, b'a', 254],
        &[1, b'b', 255],
        &[1, b'c', 3, b'2', b'.', b'5'],
    ]
    .concat();
    assert_eq!(
        restore(&framed(&zset, 9)),
        Ok(Object::ZSet(vec![
            (b"a".to_vec(), f64::INFINITY),
            (b"b".to_vec(), f64::NEG_INFINITY),
            (b"c".to_vec(), 2.5),
        ]))
    );
    // A plain node ("big"), then a packed one holding 7 and "s".
    let packed = [12, 0, 0, 0, 2, 0, 0x07, 0x01, 0x81, b's', 0x02, END];
    let list = [
        &[code::LIST_QUICKLIST_2, 2, 1, 3, b'b', b'i', b'g', 2, 12][..],
        &packed,
    ]
    .concat();
    assert_eq!(
        restore(&framed(&list, 10)),
        Ok(Object::List(texts(&["big", "7", "s"])))
    );
}

/// A stream whose consumer `alice` owns the pending entry 1-1 (type 15, no entries).
fn stream_body(consumer_owns: &[u8], pending: &[u8]) -> Vec<u8> {
    [
        &[code::STREAM_LISTPACKS, 0, 0, 5, 5, 1, 1, b'g', 1, 1][..],
        pending,
        &[1, 5][..],
        b"alice",
        &[0; 8],
        consumer_owns,
    ]
    .concat()
}

#[test]
fn damaged_streams_are_refused() {
    let id = [[0, 0, 0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 0, 0, 1]].concat();
    let entry = [&[1][..], &id, &[0; 8], &[1]].concat();
    let owns = [&[1][..], &id].concat();
    assert!(restore(&framed(&stream_body(&owns, &entry), 9)).is_ok());
    let other_id = [[0u8; 8], [0, 0, 0, 0, 0, 0, 0, 2]].concat();
    let owns_other = [&[1][..], &other_id].concat();
    let owns_twice = [&[2][..], &id, &id].concat();
    for (body, why) in [
        (
            stream_body(&[0], &entry),
            "a pending entry without a consumer",
        ),
        (
            stream_body(&owns_other, &entry),
            "a consumer's entry not pending in its group",
        ),
        (
            stream_body(&owns_twice, &entry),
            "a pending entry of two consumers",
        ),
    ] {
        assert_eq!(restore(&framed(&body, 9)), Err(bad(why)));
    }
    // One node of one entry (5-5, fields "f" "v"), under a length of 2.
    let node = listpack::write(&[
        listpack::Item::Int(1),
        listpack::Item::Int(0),
        listpack::Item::Int(1),
        listpack::Item::Str(b"f"),
        listpack::Item::Int(0),
        listpack::Item::Int(2),
        listpack::Item::Int(0),
        listpack::Item::Int(0),
        listpack::Item::Str(b"v"),
        listpack::Item::Int(4),
    ]);
    let master = [[0, 0, 0, 0, 0, 0, 0, 5], [0, 0, 0, 0, 0, 0, 0, 5]].concat();
    let with_length = |length: u8, last: u8| {
        let mut body = vec![code::STREAM_LISTPACKS, 1, 16];
        body.extend_from_slice(&master);
        body.push(node.len() as u8);
        body.extend_from_slice(&node);
        body.extend_from_slice(&[length, 5, last, 0]);
        body
    };
    assert!(restore(&framed(&with_length(1, 5), 9)).is_ok());
    assert_eq!(
        restore(&framed(&with_length(2, 5), 9)),
        Err(bad("a stream's length that its entries disagree with"))
    );
    assert_eq!(
        restore(&framed(&with_length(1, 4), 9)),
        Err(bad("a stream entry past the stream's last ID"))
    );
}

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..12),
        proptest::collection::vec(any::<u8>(), 60..20_000),
    ]
}

fn object() -> impl Strategy<Value = Object> {
    let names = || proptest::collection::hash_set(bytes(), 1..40);
    let score = prop_oneof![
        any::<f64>().prop_filter("not NaN", |s| !s.is_nan()),
        Just(f64::INFINITY),
        Just(-0.0),
    ];
    prop_oneof![
        bytes().prop_map(Object::String),
        proptest::collection::vec(bytes(), 1..40).prop_map(Object::List),
        names().prop_map(|set| Object::Set(set.into_iter().collect())),
        (names(), proptest::collection::vec(bytes(), 40)).prop_map(|(fields, values)| {
            Object::Hash(fields.into_iter().zip(values).collect())
        }),
        (names(), proptest::collection::vec(score, 40)).prop_map(|(members, scores)| {
            Object::ZSet(members.into_iter().zip(scores).collect())
        }),
        stream().prop_map(Object::Stream),
    ]
}

/// Streams of up to 300 entries (several nodes), whose fields repeat often (entries with
/// the master's fields are written without their names), and up to three groups.
fn stream() -> impl Strategy<Value = Stream> {
    let field = prop_oneof![Just(b"f".to_vec()), Just(b"g".to_vec()), bytes()];
    let fields = proptest::collection::vec((field, bytes()), 1..4).prop_map(|pairs| {
        pairs
            .into_iter()
            .flat_map(|(f, v)| [f, v])
            .collect::<Vec<_>>()
    });
    let gap = prop_oneof![
        Just((0u64, 1u64)),
        (0u64..3, 0u64..1 << 40),
        (1u64..1 << 50, 0u64..5)
    ];
    let entries = proptest::collection::vec((gap, fields), 0..300);
    let group = (
        proptest::collection::vec(bytes(), 1..3),
        proptest::collection::vec(
            (any::<prop::sample::Index>(), any::<i64>(), any::<u64>()),
            0..5,
        ),
        any::<i64>(),
        prop_oneof![Just(-1i64), 0i64..1 << 40],
    );
    // Counts, if any: entries removed, and the largest deleted ID.
    let counts = proptest::option::of((0u64..1 << 40, any::<u64>(), any::<u64>()));
    let parts = (entries, proptest::collection::vec(group, 0..3), counts);
    parts.prop_map(|(entries, groups, counts)| {
        let mut id = StreamId { ms: 1, seq: 0 };
        let entries: Vec<StreamEntry> = entries
            .into_iter()
            .map(|((ms, seq), fields)| {
                id = if ms == 0 {
                    StreamId {
                        ms: id.ms,
                        seq: id.seq + seq.max(1),
                    }
                } else {
                    StreamId {
                        ms: id.ms + ms,
                        seq,
                    }
                };
                StreamEntry { id, fields }
            })
            .collect();
        let groups = groups
            .into_iter()
            .enumerate()
            .map(|(at, (consumers, pending, seen_at, read))| {
                let mut owners: Vec<Vec<u8>> = consumers.clone();
                owners.sort();
                owners.dedup();
                let mut pending: Vec<PendingEntry> = pending
                    .into_iter()
                    .filter(|_| !entries.is_empty())
                    .map(|(pick, delivered_at, deliveries)| PendingEntry {
                        id: entries[pick.index(entries.len())].id,
                        consumer: owners[pick.index(owners.len())].clone(),
                        delivered_at,
                        deliveries,
                    })
                    .collect();
                pending.sort_by_key(|p| p.id);
                pending.dedup_by_key(|p| p.id);
                Group {
                    name: format!("group {at}").into_bytes(),
                    last_id: id,
                    // Written only with the stream's counts (type 19).
                    entries_read: counts.map(|_| read),
                    pending,
                    consumers: owners
                        .into_iter()
                        .map(|name| Consumer { name, seen_at })
                        .collect(),
                }
            })
            .collect();
        let counts = counts.map(|(removed, ms, seq)| StreamCounts {
            entries_added: entries.len() as u64 + removed,
            max_deleted: StreamId { ms, seq },
        });
        Stream {
            entries,
            last_id: id,
            counts,
            groups,
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn what_dump_writes_restore_reads_back(object in object()) {
        let payload = dump(&object);
        let back = restore(&payload).expect("a payload DUMP wrote");
        // Scores compare by bits: -0.0 stays -0.0.
        prop_assert_eq!(format!("{back:?}"), format!("{object:?}"));
    }

    /// A damaged payload whose checksum was made to fit: refused or read, never a panic.
    #[test]
    fn damaged_payloads_with_fitting_checksums_never_panic(
        object in object(),
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
        cut in any::<prop::sample::Index>(),
    ) {
        let payload = dump(&object);
        let mut body = payload[..payload.len() - FOOTER].to_vec();
        let at = at.index(body.len());
        body[at] = byte;
        let _ = restore(&framed(&body, DUMP_VERSION));
        let cut = cut.index(body.len());
        let _ = restore(&framed(&body[..cut], DUMP_VERSION));
    }

    #[test]
    fn arbitrary_bytes_with_a_fitting_checksum_never_panic(
        body in proptest::collection::vec(any::<u8>(), 0..200),
    ) {
        let _ = restore(&framed(&body, DUMP_VERSION));
    }
}

/// `data` LZF-compressed the simple way: one literal run of its first `period` bytes, then
/// copies of the longest kind from `period` bytes back (for data that repeats with that
/// period, and whose length past the literal is a multiple of 264).
fn lzf_periodic(data: &[u8], period: usize) -> Vec<u8> {
    assert!((1..=32).contains(&period) && (data.len() - period).is_multiple_of(264));
    let mut out = vec![(period - 1) as u8];
    out.extend_from_slice(&data[..period]);
    let back = period - 1;
    for _ in 0..(data.len() - period) / 264 {
        out.extend_from_slice(&[0xe0 | (back >> 8) as u8, 255, back as u8]);
    }
    out
}

/// A payload whose elements take far more memory than its bytes is refused once the
/// decoding has used its budget, before the rest is decoded: a packed set compressed
/// 88 to 1, whose 2-byte elements cost 33 bytes each, and a stream whose entries reuse
/// one long field name of their node's.
#[test]
fn a_payload_decoding_past_its_budget_is_refused() {
    let elements = 132 * 80 + 1;
    let mut packed = vec![0u8; 6];
    for _ in 0..elements {
        packed.extend_from_slice(&[1, 1]);
    }
    packed.push(END);
    let total = packed.len() as u32;
    packed[..4].copy_from_slice(&total.to_le_bytes());
    packed[4..6].copy_from_slice(&u16::MAX.to_le_bytes());
    // The header and the end marker as literals around the entries' copies.
    let entries = &packed[6..packed.len() - 1];
    let mut compressed = vec![5];
    compressed.extend_from_slice(&packed[..6]);
    compressed.extend(lzf_periodic(entries, 2));
    compressed.extend_from_slice(&[0, END]);
    let mut body = vec![code::SET_LISTPACK, 0xc3];
    put_length(&mut body, compressed.len() as u64);
    put_length(&mut body, packed.len() as u64);
    body.extend_from_slice(&compressed);
    let payload = framed(&body, NEWEST_VERSION);
    assert!(payload.len() < 400, "{} bytes", payload.len());
    let need = packed.len() + 32 + elements * (1 + 32);
    assert_eq!(
        restore_within(&payload, Budget::of(need)),
        Err(bad("a set member twice")),
        "decoded in full within its budget"
    );
    assert_eq!(
        restore_within(&payload, Budget::of(need - 1)),
        Err(RdbError::TooLarge)
    );

    let name = vec![b'n'; 4096];
    let entries = 100;
    let mut items = vec![
        listpack::Item::Int(entries),
        listpack::Item::Int(0),
        listpack::Item::Int(1),
        listpack::Item::Str(&name),
        listpack::Item::Int(0),
    ];
    for seq in 0..entries {
        items.extend([
            listpack::Item::Int(2),
            listpack::Item::Int(0),
            listpack::Item::Int(seq),
            listpack::Item::Str(b"v"),
            listpack::Item::Int(4),
        ]);
    }
    let node = listpack::write(&items);
    let mut body = vec![code::STREAM_LISTPACKS, 1];
    put_string(&mut body, &[0; 16]);
    put_string(&mut body, &node);
    // Its length, its last ID (ms, seq), no groups.
    for length in [entries, 0, entries - 1, 0] {
        put_length(&mut body, length as u64);
    }
    let payload = framed(&body, 9);
    let names = entries as usize * (name.len() + 32);
    let within = restore_within(&payload, Budget::of(names + 1_000_000));
    assert!(matches!(within, Ok(Object::Stream(_))), "{within:?}");
    assert_eq!(
        restore_within(&payload, Budget::of(names)),
        Err(RdbError::TooLarge)
    );
    // The budget restore itself gives: 16 times the payload plus 256 MiB.
    assert!(restore(&payload).is_ok());
}
