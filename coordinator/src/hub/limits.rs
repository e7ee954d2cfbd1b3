//! The hub's side of operators' per-host limits ([`crate::host_limits`]): stored, then
//! held in memory for the next replan's host caps.

use super::messages::{HostLimits, SetHostLimit};
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
                self.actor
                    .ask(SetHostLimit {
                        host: l.host.clone(),
                        max_fetches_per_day: Some(l.max_fetches_per_day),
                    })
                    .await;
                tracing::info!(host = %l.host, max_fetches_per_day = l.max_fetches_per_day, "host limit set");
            }
            None => {
                let host = host.trim().to_ascii_lowercase();
                self.actor
                    .ask(SetHostLimit {
                        host: host.clone(),
                        max_fetches_per_day: None,
                    })
                    .await;
                tracing::info!(%host, "host limit cleared");
            }
        }
        Ok(out)
    }

    /// The operators' host limits in force, by host.
    pub async fn host_limits(&self) -> Vec<crate::host_limits::HostLimit> {
        let mut out = self.actor.ask(HostLimits).await;
        out.sort_by(|a, b| a.host.cmp(&b.host));
        out
    }
}
