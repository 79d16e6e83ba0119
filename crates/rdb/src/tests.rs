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
        (code::STREAM_LISTPACKS_2, "streams"),
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
    ]
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
