//! Operators' per-host fetch limits: a host that asked to be crawled gently (or whose
//! owner the operator has an agreement with) gets a cap on its feeds' fetches per day
//! together. Stored under `hostlimit/HOST`, loaded by the hub at start and replaced on
//! change; the plan applies the smallest of the politeness cap, a throttle's cap and this.
//!
//! A limit can only lower what the workers' politeness gap allows: a higher rate would be
//! planned but not executed, since workers enforce the gap per host on the wall clock.

use crate::registry::RegistryError;
use crate::store::keys::Key;
use crate::store::{KvBackend, Op};
use serde::{Deserialize, Serialize};

/// Largest limit accepted, fetches per day (one every ~9 ms).
pub const MAX_HOST_LIMIT: f64 = 1e7;

/// One host's limit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostLimit {
    /// Host as feeds carry it (`name` or `name:port`, lower case).
    pub host: String,
    /// Fetches per day of all the host's feeds together, at most.
    pub max_fetches_per_day: f64,
}

/// `host` normalized as feeds carry it, or why it cannot be a host.
fn normalize(host: &str) -> Result<String, RegistryError> {
    let h = host.trim().to_ascii_lowercase();
    let ok_char = |c: char| c.is_ascii_alphanumeric() || "-.:[]_".contains(c);
    if h.is_empty() || h.len() > 261 || !h.chars().all(ok_char) {
        return Err(RegistryError::InvalidArgument(format!(
            "host `{host}` must be a host name or address, optionally with :port (at most 261 characters)"
        )));
    }
    Ok(h)
}

/// Sets (or, with 0, clears) `host`'s limit; returns the limit now in force.
pub async fn set<B: KvBackend>(
    store: &B,
    host: &str,
    max_fetches_per_day: f64,
) -> Result<Option<HostLimit>, RegistryError> {
    let host = normalize(host)?;
    let key = Key::HostLimit(&host).encode()?;
    if max_fetches_per_day == 0.0 {
        store.batch(vec![Op::Delete(key)]).await?;
        return Ok(None);
    }
    if !max_fetches_per_day.is_finite() || !(0.0..=MAX_HOST_LIMIT).contains(&max_fetches_per_day) {
        return Err(RegistryError::InvalidArgument(format!(
            "max_fetches_per_day {max_fetches_per_day} must be above 0 and at most {MAX_HOST_LIMIT} (0 clears the limit)"
        )));
    }
    let limit = HostLimit {
        host,
        max_fetches_per_day,
    };
    let value = serde_json::to_vec(&limit).expect("host limits serialize");
    store.batch(vec![Op::Put(key, value)]).await?;
    Ok(Some(limit))
}

/// Every stored limit, by host; unreadable records are skipped with a warning.
pub async fn all<B: KvBackend>(store: &B) -> Result<Vec<HostLimit>, RegistryError> {
    let prefix = Key::HostLimit("").prefix()?;
    let mut out = Vec::new();
    let mut after = None;
    loop {
        let page = store.range(prefix.clone(), after.clone(), 1000).await?;
        let Some(last) = page.last() else {
            return Ok(out);
        };
        after = Some(last.0.clone());
        for (k, v) in &page {
            match serde_json::from_slice::<HostLimit>(v) {
                Ok(l) => out.push(l),
                Err(e) => {
                    tracing::warn!(key = %String::from_utf8_lossy(k), error = %e, "unreadable host limit skipped")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryBackend;

    #[test]
    fn limits_are_checked_stored_listed_and_cleared() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let s = MemoryBackend::new();
            let l = set(&s, " News.Example:8443 ", 24.0).await.unwrap().unwrap();
            assert_eq!(l.host, "news.example:8443");
            set(&s, "b.example", 0.5).await.unwrap();
            for bad in [f64::NAN, -1.0, f64::INFINITY, 1e8] {
                let e = set(&s, "c.example", bad).await.unwrap_err();
                assert!(e.to_string().contains("max_fetches_per_day"), "{e}");
            }
            for bad in ["", "a/b", "a b", &"x".repeat(300)] {
                assert!(set(&s, bad, 1.0).await.is_err(), "{bad:?}");
            }
            let hosts: Vec<String> = all(&s).await.unwrap().into_iter().map(|l| l.host).collect();
            assert_eq!(hosts, ["b.example", "news.example:8443"]);
            assert_eq!(set(&s, "b.example", 0.0).await.unwrap(), None);
            assert_eq!(all(&s).await.unwrap().len(), 1);
        });
    }
}
