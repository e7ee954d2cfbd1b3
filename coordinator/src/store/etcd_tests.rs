//! Tests of [`super`]: journal chunks and endpoint URLs, then against a private etcd
//! (missing, it fails the test under CI): pages read in segments, large batches and
//! crashed journals, and the error an unreachable etcd gives.

use super::*;

#[test]
fn journal_chunks_round_trip_and_prefix_ends_bound_a_prefix() {
    let ops = vec![
        Op::Put(b"feed/a".to_vec(), b"{}".to_vec()),
        Op::Delete(b"feed/b".to_vec()),
        Op::Put(vec![0xff, 0], Vec::new()),
    ];
    assert_eq!(decode(&encode(&ops)).unwrap(), ops);
    assert!(
        decode(b"P\x00\x00\x00\x09ab").is_err(),
        "a cut chunk is refused"
    );
    assert!(decode(b"X\x00\x00\x00\x00").is_err());
    assert_eq!(prefix_end(b"/kairos/feed/"), b"/kairos/feed0".to_vec());
    assert_eq!(prefix_end(b"a\xff\xff"), b"b".to_vec());
    assert_eq!(prefix_end(b"\xff"), vec![0]);
    assert_eq!(endpoint_url("a:2379", false).unwrap(), "http://a:2379");
    assert_eq!(endpoint_url("a:2379", true).unwrap(), "https://a:2379");
    assert!(endpoint_url("https://a:2379", false).is_err());
    assert!(endpoint_url("http://a:2379", true).is_err());
}

/// Runs `test` with the endpoints of a private one-member etcd, on two threads, and
/// removes the etcd's files after.
fn on_etcd<F: std::future::Future<Output = ()>>(tag: &str, test: impl FnOnce(Vec<String>) -> F) {
    let dir = std::env::temp_dir().join(format!("kairos-etcd-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let Some(cluster) = kairos_tests::etcd::EtcdCluster::start(&dir, 1) else {
        return;
    };
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(test(cluster.endpoints.clone()));
    drop(cluster);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Pages of a big kind, read in segments, are the pages one range would give.
#[test]
fn pages_of_a_big_kind_read_in_segments_are_the_same_pages() {
    on_etcd("pages", |endpoints| async move {
        let cfg = EtcdConfig {
            endpoints,
            prefix: "/p/".into(),
            big_range: 10,
            ..Default::default()
        };
        let b = EtcdBackend::connect(&cfg).await.unwrap();
        let memory = crate::store::memory::MemoryBackend::new();
        // Ids of every length and shape, bytes near the ends of the range included,
        // beside a neighbouring kind whose keys must never show.
        let mut ids: Vec<Vec<u8>> = Vec::new();
        for i in 0..300u32 {
            let mut id = format!("{:x}", i.wrapping_mul(2_654_435_761) >> (i % 7 * 4)).into_bytes();
            if i % 11 == 0 {
                id.push(0xfe);
            }
            if i % 13 == 0 {
                id.truncate(1);
            }
            ids.push(id);
        }
        ids.extend([
            b"0".to_vec(),
            b"00".to_vec(),
            b"0\x01".to_vec(),
            vec![0xfe, 0xfe],
        ]);
        ids.sort();
        ids.dedup();
        let mut ops: Vec<Op> = ids
            .iter()
            .map(|id| Op::Put([b"feed/".as_slice(), id].concat(), id.clone()))
            .collect();
        ops.push(Op::Put(b"feed0".to_vec(), b"next kind".to_vec()));
        ops.push(Op::Put(b"fee".to_vec(), b"before".to_vec()));
        b.batch(ops.clone()).await.unwrap();
        memory.batch(ops).await.unwrap();
        for limit in [1, 3, 7, 64] {
            let (mut after, mut pages) = (None, 0);
            loop {
                let got = b
                    .range(b"feed/".to_vec(), after.clone(), limit)
                    .await
                    .unwrap();
                let want = memory
                    .range(b"feed/".to_vec(), after.clone(), limit)
                    .await
                    .unwrap();
                assert_eq!(got, want, "limit {limit}, after {after:?}");
                let Some(last) = got.last() else { break };
                after = Some(last.0.clone());
                pages += 1;
            }
            assert!(pages >= ids.len() / limit / 2, "{pages} pages");
        }
        assert!(b.big.lock().unwrap().contains(b"/p/feed/".as_slice()));
        // A cursor between keys, and one past every key.
        for after in [b"feed/7".to_vec(), b"feed/\xff".to_vec(), b"feed/".to_vec()] {
            let got = b
                .range(b"feed/".to_vec(), Some(after.clone()), 5)
                .await
                .unwrap();
            let want = memory
                .range(b"feed/".to_vec(), Some(after), 5)
                .await
                .unwrap();
            assert_eq!(got, want);
        }
    });
}

/// Batches past the per-transaction limit, and journals a crash left behind.
#[test]
fn large_batches_land_whole_and_crashed_journals_settle_at_connect() {
    on_etcd("journal", |endpoints| async move {
        let cfg = EtcdConfig {
            endpoints,
            prefix: "/j/".into(),
            max_txn_ops: 4,
            max_txn_bytes: 4096,
            ..Default::default()
        };
        let b = EtcdBackend::connect(&cfg).await.unwrap();
        let key = |i: usize| format!("feed/{i:04}").into_bytes();
        let ops: Vec<Op> = (0..50).map(|i| Op::Put(key(i), vec![b'x'; 300])).collect();
        b.batch(ops).await.unwrap();
        let all = b.range(b"feed/".to_vec(), None, 1000).await.unwrap();
        assert_eq!(all.len(), 50);
        assert!(
            b.range(JOURNAL.to_vec(), None, 10)
                .await
                .unwrap()
                .is_empty(),
            "the journal is removed once applied"
        );
        // get_many beyond one transaction, in the order asked.
        let keys: Vec<Vec<u8>> = (0..10)
            .rev()
            .map(key)
            .chain([b"feed/none".to_vec()])
            .collect();
        let got = b.get_many(keys).await.unwrap();
        assert_eq!(got.len(), 11);
        assert!(got[..10]
            .iter()
            .all(|v| v.as_deref() == Some(&[b'x'; 300][..])));
        assert_eq!(got[10], None);
        // A conditional write must fit one transaction.
        let big: Vec<Op> = (0..5).map(|i| Op::Delete(key(i))).collect();
        let e = b.txn(vec![], big).await.unwrap_err();
        assert!(
            e.to_string().contains("exceeds one etcd transaction"),
            "{e}"
        );
        // A crash after the commit marker: applied at the next connect. A crash before
        // it: dropped.
        let raw = |k: &str| format!("/j/{k}").into_bytes();
        let mut kv = b.conn().kv;
        let committed = encode(&[
            Op::Put(b"feed/crashed".to_vec(), b"1".to_vec()),
            Op::Delete(key(0)),
        ]);
        kv.put(raw("journal/a/00000000"), committed, None)
            .await
            .unwrap();
        kv.put(raw("journal/a/commit"), Vec::new(), None)
            .await
            .unwrap();
        let torn = encode(&[Op::Put(b"feed/torn".to_vec(), b"1".to_vec())]);
        kv.put(raw("journal/b/00000000"), torn, None).await.unwrap();
        let b = EtcdBackend::connect(&cfg).await.unwrap();
        assert_eq!(
            b.get(b"feed/crashed".to_vec()).await.unwrap(),
            Some(b"1".to_vec())
        );
        assert_eq!(b.get(key(0)).await.unwrap(), None);
        assert_eq!(b.get(b"feed/torn".to_vec()).await.unwrap(), None);
        // Compaction: the first call only notes the revision; the second drops the
        // history before it, so a read at an older revision is refused.
        let (_, old) = b.get_revision(key(1)).await.unwrap().unwrap();
        assert_eq!(b.compact().await.unwrap(), None);
        b.batch(vec![Op::Delete(key(1))]).await.unwrap();
        let rev = b.compact().await.unwrap().expect("compacted");
        assert!(rev > old);
        let e = b
            .conn()
            .kv
            .get(
                raw("feed/0001"),
                Some(GetOptions::new().with_revision(old as i64)),
            )
            .await
            .unwrap_err();
        assert!(e.to_string().contains("compacted"), "{e}");
        assert!(b
            .range(JOURNAL.to_vec(), None, 10)
            .await
            .unwrap()
            .is_empty());
    });
}

#[test]
fn an_unreachable_etcd_is_a_clear_error_naming_the_endpoints() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let cfg = EtcdConfig {
        endpoints: vec![format!("127.0.0.1:{port}")],
        connect_timeout: Duration::from_millis(800),
        request_timeout: Duration::from_millis(300),
        ..Default::default()
    };
    let e = rt
        .block_on(EtcdBackend::connect(&cfg))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!("127.0.0.1:{port}")) && e.contains("not reachable"),
        "{e}"
    );
}
