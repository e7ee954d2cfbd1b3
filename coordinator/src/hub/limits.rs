//! The hub's side of operators' per-host limits ([`crate::host_limits`]): stored, then
//! held in memory for the next replan's host caps.

use super::Hub;
use crate::store::KvBackend;

impl<B: KvBackend> Hub<B> {
    /// Sets (0: clears) an operator's limit on `host`'s fetches per day; the next replan
    /// applies it.
    pub async fn set_host_limit(
        &self,
        host: &str,
        max_fetches_per_day: f64,
    ) -> Result<Option<crate::host_limits::HostLimit>, crate::registry::RegistryError> {
        let out = crate::host_limits::set(self.store.as_ref(), host, max_fetches_per_day).await?;
        match &out {
            Some(l) => {
                let (h, max) = (l.host.clone(), l.max_fetches_per_day);
                self.actor.call(move |s| s.host_limits.insert(h, max)).await;
                tracing::info!(host = %l.host, max_fetches_per_day = l.max_fetches_per_day, "host limit set");
            }
            None => {
                let host = host.trim().to_ascii_lowercase();
                let h = host.clone();
                self.actor.call(move |s| s.host_limits.remove(&h)).await;
                tracing::info!(%host, "host limit cleared");
            }
        }
        Ok(out)
    }

    /// The operators' host limits in force, by host.
    pub async fn host_limits(&self) -> Vec<crate::host_limits::HostLimit> {
        let mut out: Vec<_> = self
            .actor
            .call(|s| {
                s.host_limits
                    .iter()
                    .map(|(h, &m)| crate::host_limits::HostLimit {
                        host: h.clone(),
                        max_fetches_per_day: m,
                    })
                    .collect::<Vec<_>>()
            })
            .await;
        out.sort_by(|a, b| a.host.cmp(&b.host));
        out
    }
}
