//! One suite, run against every backend: the semantics the coordinator relies on.

use super::embedded::EmbeddedBackend;
use super::keys::Key;
use super::memory::MemoryBackend;
use super::{KvBackend, Op};

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
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
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
