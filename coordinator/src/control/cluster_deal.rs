//! Dealing hosts to workers, and what a term hands the next: the workers it had and the
//! hosts the load bound spilled to each ([`Member`]).
//!
//! A deal (`Cluster::reshard`) places every host by capacity-weighted rendezvous hashing
//! with a load bound ([`crate::shard`]), keeping each host the bound had spilled with the
//! worker it went to while that worker has room: where the bound spills a host depends on
//! the loads it is dealt by, and those drift between deals (and a new leader's are its own
//! plan's), so a fresh deal would move hosts that no membership change called for.

use super::{name_of, Cluster};
use crate::shard::{self, Host, Worker};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A worker of the term, as kept in the store for the next leader: its name, its capacity,
/// and the hosts it holds that the load bound spilled past another worker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Member {
    /// The name it registers with.
    pub name: String,
    /// Its declared capacity.
    pub capacity: f64,
    /// Hosts dealt to it although another worker ranks first for them: `[host, the name of
    /// the worker that ranks first]`, by host. Only these need naming: every other host is
    /// its first-ranked worker's. Absent in records written before 2026-12-04.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spilled: Vec<[String; 2]>,
}

/// The most spilled hosts the `members` record names (about 30 bytes each in its JSON), the
/// first by host name: a failover may move the ones left out, which the log says when the
/// record is written.
pub const MAX_SPILLED_STORED: usize = 16_384;

impl Cluster {
    /// Holds the places of the last term's workers until each registers again or `wait`
    /// has passed since the first [`Cluster::stop_awaiting`] (the first lease check, when
    /// the term begins serving: opening a big store takes longer than a lease);
    /// workers already registered are not held.
    pub fn await_members(&mut self, members: &[Member], wait: Duration) {
        let live: BTreeSet<&str> = self.sessions.values().map(|s| s.name.as_str()).collect();
        self.awaited = members
            .iter()
            .filter(|m| !live.contains(m.name.as_str()) && m.capacity > 0.0)
            .map(|m| (m.name.clone(), m.capacity))
            .collect();
        self.inherited = members
            .iter()
            .flat_map(|m| {
                m.spilled
                    .iter()
                    .map(|[host, from]| (host.clone(), [m.name.clone(), from.clone()]))
            })
            .collect();
        (self.awaiting_for, self.awaiting_until) = (wait, None);
        self.reshard();
    }

    /// Gives up on the awaited workers once the time given to them has passed; returns the
    /// names that did not come back (their hosts are dealt to the others). The first call
    /// starts the time.
    pub fn stop_awaiting(&mut self, now: Instant) -> Vec<String> {
        if self.awaited.is_empty() {
            return Vec::new();
        }
        match self.awaiting_until {
            None => {
                self.awaiting_until = Some(now + self.awaiting_for);
                Vec::new()
            }
            Some(until) if now >= until => {
                self.awaiting_until = None;
                let gone: Vec<String> = std::mem::take(&mut self.awaited).into_keys().collect();
                if !gone.is_empty() {
                    self.reshard();
                }
                gone
            }
            _ => Vec::new(),
        }
    }

    /// Workers whose hosts are held for them (not registered again since the term began).
    pub fn awaited(&self) -> Vec<String> {
        self.awaited.keys().cloned().collect()
    }

    /// The workers of this term, awaited ones included, by name, with the hosts spilled to
    /// each (at most [`MAX_SPILLED_STORED`] in all, the first by host name): what the next
    /// leader awaits and keeps.
    pub fn members(&self) -> Vec<Member> {
        let member = |name: &str, capacity: f64| Member {
            name: name.to_string(),
            capacity,
            spilled: Vec::new(),
        };
        let mut all: BTreeMap<&str, Member> = self
            .awaited
            .iter()
            .map(|(n, c)| (n.as_str(), member(n, *c)))
            .collect();
        for s in self.sessions.values() {
            all.insert(&s.name, member(&s.name, s.capacity));
        }
        let mut spilled: Vec<(&String, &String)> = self.spilled_from.iter().collect();
        spilled.sort_unstable();
        for (host, from) in spilled.into_iter().take(MAX_SPILLED_STORED) {
            let holder = match self.owner.get(host) {
                Some(id) => name_of(id),
                None => match self.held.get(host) {
                    Some(name) => name.as_str(),
                    None => continue,
                },
            };
            if let Some(m) = all.get_mut(holder) {
                m.spilled.push([host.clone(), from.clone()]);
            }
        }
        all.into_values().collect()
    }

    /// Hosts the load bound spilled past their first-ranked worker, now.
    pub fn spilled_hosts(&self) -> usize {
        self.spilled_from.len()
    }

    /// Gives session `id` of worker `name` the hosts its earlier session owned or that were
    /// held for it, and publishes; no other host changes owner.
    pub(super) fn rebind(&mut self, name: &str, id: &str) {
        let mut owner = (*self.owner).clone();
        for w in owner.values_mut() {
            if name_of(w) == name {
                *w = id.to_string();
            }
        }
        self.held.retain(|host, held_for| {
            if held_for == name {
                owner.insert(host.clone(), id.to_string());
                false
            } else {
                true
            }
        });
        self.owner = Arc::new(owner);
        self.publish();
    }

    /// Re-deals every host over the live sessions and publishes the result.
    pub(super) fn reshard(&mut self) {
        let mut load: BTreeMap<&str, f64> = BTreeMap::new();
        for f in self.feeds.values() {
            let per_day = f.offsets_seconds.len() as f64 * 86_400.0 / f.period_seconds.max(1.0);
            *load.entry(f.host.as_str()).or_default() += per_day;
        }
        let hosts: Vec<Host> = load
            .into_iter()
            .map(|(name, load)| Host {
                name: name.to_string(),
                load,
            })
            .collect();
        // Hashed by name (a worker's hosts do not depend on its session); awaited workers
        // take part with no session, so their hosts go to nobody until they are back.
        let mut sessions: Vec<Option<&str>> = Vec::new();
        let mut workers: Vec<Worker> = Vec::new();
        for (id, s) in &self.sessions {
            sessions.push(Some(id));
            workers.push(Worker {
                id: s.name.clone(),
                capacity: s.capacity,
            });
        }
        for (name, capacity) in &self.awaited {
            sessions.push(None);
            workers.push(Worker {
                id: name.clone(),
                capacity: *capacity,
            });
        }
        // Where the last deal put each host, and whom it spilled it from: this term's deal
        // (owned or held), else the last term's record.
        let index: HashMap<&str, usize> = workers
            .iter()
            .enumerate()
            .map(|(i, w)| (w.id.as_str(), i))
            .collect();
        let previous: Vec<Option<shard::Previous>> = hosts
            .iter()
            .map(|h| {
                let name = h.name.as_str();
                let (holder, from) = match (self.owner.get(name), self.held.get(name)) {
                    (Some(id), _) => (name_of(id), self.spilled_from.get(name)),
                    (None, Some(n)) => (n.as_str(), self.spilled_from.get(name)),
                    (None, None) => {
                        let [holder, from] = self.inherited.get(name)?;
                        (holder.as_str(), Some(from))
                    }
                };
                let from = from.map_or(holder, String::as_str);
                Some(shard::Previous {
                    owner: *index.get(holder)?,
                    first: *index.get(from)?,
                })
            })
            .collect();
        let (mut owner, mut held) = (HashMap::new(), HashMap::new());
        let mut spilled_from = HashMap::new();
        // No worker at all (Err): every host waits unowned.
        if let Ok(a) = shard::assign_keeping(&hosts, &workers, self.cfg.epsilon, &previous) {
            for ((h, w), first) in hosts.iter().zip(a.owner).zip(a.first) {
                match sessions[w] {
                    Some(id) => owner.insert(h.name.clone(), id.to_string()),
                    None => held.insert(h.name.clone(), workers[w].id.clone()),
                };
                if first != w {
                    spilled_from.insert(h.name.clone(), workers[first].id.clone());
                }
            }
            for h in &hosts {
                self.inherited.remove(&h.name);
            }
        }
        self.spilled_from = spilled_from;
        self.held = held;
        // A move is a host that had an owner (live or just expired) and now has another
        // worker (the same worker in a new session is not a move).
        let moved: Vec<(&String, &str, &str)> = owner
            .iter()
            .filter_map(|(h, w)| {
                let old = self.owner.get(h)?;
                (name_of(old) != name_of(w)).then(|| (h, name_of(old), name_of(w)))
            })
            .collect();
        if !moved.is_empty() {
            tracing::info!(
                moved = moved.len(),
                hosts = owner.len(),
                first = ?&moved[..moved.len().min(5)],
                "hosts dealt again; some moved between workers"
            );
        }
        self.moves_total += moved.len() as u64;
        self.owner = Arc::new(owner);
        self.publish();
    }
}
