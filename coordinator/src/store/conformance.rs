//! One suite, run against every backend: the semantics the coordinator relies on.

use super::embedded::EmbeddedBackend;
use super::keys::Key;
use super::memory::MemoryBackend;
use super::{Compare, KvBackend, Op};

async fn suite<B: KvBackend>(b: &B) {
    let k = |s: &str| s.as_bytes().to_vec();
    assert_eq!(b.get(k("feed/a")).await.unwrap(), None);
    b.batch(vec![
        Op::Put(k("feed/a"), k("1")),
        Op::Put(k("feed/b"), k("2")),
        Op::Put(k("user/u"), k("3")),
    ])
    .await
    .unwrap();
    assert_eq!(b.get(k("feed/a")).await.unwrap(), Some(k("1")));
    // Overwrite and delete, atomically in order.
    b.batch(vec![
        Op::Put(k("feed/a"), k("9")),
        Op::Delete(k("feed/b")),
        Op::Delete(k("feed/none")),
    ])
    .await
    .unwrap();
    assert_eq!(b.get(k("feed/a")).await.unwrap(), Some(k("9")));
    assert_eq!(b.get(k("feed/b")).await.unwrap(), None);
    let many = b
        .get_many(vec![k("feed/b"), k("feed/a"), k("user/u")])
        .await
        .unwrap();
    assert_eq!(many, vec![None, Some(k("9")), Some(k("3"))]);
    // put_if_absent: first write wins.
    assert!(b.put_if_absent(k("item/f/01"), k("x")).await.unwrap());
    assert!(!b.put_if_absent(k("item/f/01"), k("y")).await.unwrap());
    assert_eq!(b.get(k("item/f/01")).await.unwrap(), Some(k("x")));
    // Ranges: one prefix only, in key order, paged by `after` (exclusive).
    let posts: Vec<Op> = (0..25u64)
        .map(|i| {
            Op::Put(
                Key::Posting("f", i).encode().unwrap(),
                i.to_string().into_bytes(),
            )
        })
        .collect();
    b.batch(posts).await.unwrap();
    b.batch(vec![Op::Put(
        Key::Posting("ff", 0).encode().unwrap(),
        k("other"),
    )])
    .await
    .unwrap();
    let prefix = Key::Posting("f", 0).prefix().unwrap();
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = b.range(prefix.clone(), after.clone(), 10).await.unwrap();
        if page.is_empty() {
            break;
        }
        assert!(page.len() <= 10);
        after = Some(page.last().unwrap().0.clone());
        seen.extend(page.into_iter().map(|(_, v)| String::from_utf8(v).unwrap()));
    }
    let want: Vec<String> = (0..25).map(|i| i.to_string()).collect();
    assert_eq!(
        seen, want,
        "every posting of feed f once, in order, none of feed ff"
    );
    assert_eq!(
        b.range(k("user/"), None, 100).await.unwrap(),
        vec![(k("user/u"), k("3"))]
    );
    assert_eq!(b.range(k("settings"), None, 10).await.unwrap(), vec![]);
    transactions(b).await;
}

/// Compare-and-swap: on values (absent or equal) and on revisions, all or nothing.
async fn transactions<B: KvBackend>(b: &B) {
    let k = |s: &str| s.as_bytes().to_vec();
    assert_eq!(b.get_revision(k("cas/x")).await.unwrap(), None);
    // Absent → create.
    assert!(b
        .txn(
            vec![Compare::Value(k("cas/x"), None)],
            vec![Op::Put(k("cas/x"), k("1")), Op::Put(k("cas/y"), k("a"))],
        )
        .await
        .unwrap());
    let (v, r1) = b.get_revision(k("cas/x")).await.unwrap().unwrap();
    assert_eq!(v, k("1"));
    assert!(r1 > 0);
    assert_eq!(
        b.get_revision(k("cas/y")).await.unwrap().unwrap().1,
        r1,
        "one txn, one revision"
    );
    // A failed comparison writes nothing, not even the ops before a later failing compare.
    assert!(!b
        .txn(
            vec![
                Compare::Value(k("cas/x"), Some(k("1"))),
                Compare::Value(k("cas/y"), None),
            ],
            vec![Op::Put(k("cas/x"), k("2")), Op::Delete(k("cas/y"))],
        )
        .await
        .unwrap());
    assert_eq!(b.get(k("cas/x")).await.unwrap(), Some(k("1")));
    assert_eq!(b.get(k("cas/y")).await.unwrap(), Some(k("a")));
    // Revision compare: the revision read is the one that holds.
    assert!(!b
        .txn(
            vec![Compare::Revision(k("cas/x"), r1 + 1000)],
            vec![Op::Put(k("cas/x"), k("3"))]
        )
        .await
        .unwrap());
    assert!(b
        .txn(
            vec![
                Compare::Revision(k("cas/x"), r1),
                Compare::Value(k("cas/y"), Some(k("a")))
            ],
            vec![Op::Put(k("cas/x"), k("3")), Op::Delete(k("cas/y"))],
        )
        .await
        .unwrap());
    let (v, r2) = b.get_revision(k("cas/x")).await.unwrap().unwrap();
    assert_eq!(v, k("3"));
    assert!(r2 > r1, "a write moves the revision on");
    assert_eq!(b.get(k("cas/y")).await.unwrap(), None);
    // The old revision no longer holds (a second writer that read before loses).
    assert!(!b
        .txn(
            vec![Compare::Revision(k("cas/x"), r1)],
            vec![Op::Put(k("cas/x"), k("4"))]
        )
        .await
        .unwrap());
    // Revision 0 means absent.
    assert!(b
        .txn(
            vec![Compare::Revision(k("cas/z"), 0)],
            vec![Op::Put(k("cas/z"), k("z"))]
        )
        .await
        .unwrap());
    assert!(!b
        .txn(
            vec![Compare::Revision(k("cas/z"), 0)],
            vec![Op::Put(k("cas/z"), k("w"))]
        )
        .await
        .unwrap());
    // Batches move revisions too.
    b.batch(vec![Op::Put(k("cas/x"), k("5"))]).await.unwrap();
    assert!(b.get_revision(k("cas/x")).await.unwrap().unwrap().1 > r2);
    // No compares: unconditional.
    assert!(b.txn(vec![], vec![Op::Delete(k("cas/x"))]).await.unwrap());
    assert_eq!(b.get_revision(k("cas/x")).await.unwrap(), None);
    // Creators of one key in flight together (on the blocking pool or over the network
    // for the embedded and etcd backends): exactly one wins.
    let key = || b"cas/race".to_vec();
    let (a, c, d, e) = tokio::join!(
        b.put_if_absent(key(), vec![1]),
        b.put_if_absent(key(), vec![2]),
        b.put_if_absent(key(), vec![3]),
        b.put_if_absent(key(), vec![4]),
    );
    let wins = [a, c, d, e]
        .into_iter()
        .filter(|w| *w.as_ref().unwrap())
        .count();
    assert_eq!(wins, 1);
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn memory_backend_conforms() {
    runtime().block_on(suite(&MemoryBackend::new()));
}

#[test]
fn embedded_backend_conforms_and_survives_reopening() {
    let dir = std::env::temp_dir().join(format!(
        "kairos-store-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let rt = runtime();
    {
        let b = EmbeddedBackend::open(&dir).unwrap();
        rt.block_on(suite(&b));
    }
    let b = EmbeddedBackend::open(&dir).unwrap();
    let got = rt.block_on(b.get(b"feed/a".to_vec())).unwrap();
    assert_eq!(
        got,
        Some(b"9".to_vec()),
        "state survives closing and reopening the file"
    );
    drop(b);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The etcd arm: a private etcd on loopback (Debian's etcd-server; required under CI).
#[test]
fn etcd_backend_conforms() {
    let dir = std::env::temp_dir().join(format!("kairos-store-etcd-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let Some(cluster) = kairos_tests::etcd::EtcdCluster::start(&dir, 1) else {
        return;
    };
    let rt = runtime();
    rt.block_on(async {
        let cfg = |prefix: &str| super::etcd::EtcdConfig {
            endpoints: cluster.endpoints.clone(),
            prefix: prefix.into(),
            ..Default::default()
        };
        let b = super::etcd::EtcdBackend::connect(&cfg("/conformance/"))
            .await
            .unwrap();
        suite(&b).await;
        // Namespaces do not see each other.
        let other = super::etcd::EtcdBackend::connect(&cfg("/other/"))
            .await
            .unwrap();
        assert_eq!(other.get(b"feed/a".to_vec()).await.unwrap(), None);
        assert!(other
            .range(b"feed/".to_vec(), None, 10)
            .await
            .unwrap()
            .is_empty());
    });
    drop(cluster);
    std::fs::remove_dir_all(&dir).unwrap();
}
