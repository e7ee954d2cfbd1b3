//! Hosts to workers: capacity-weighted rendezvous hashing with bounded load.
//!
//! The sharding unit is the politeness group (host), so one worker enforces a host's rate
//! limit. Each (host, worker) pair gets a pseudo-random score from a stable hash, weighted
//! by the worker's capacity: `score = −capacity / ln(u)`, `u ∈ (0, 1)` (weighted rendezvous
//! hashing), so a worker's expected share of hosts is proportional to its capacity and a
//! host's ranking of workers does not depend on which other workers exist. Each host goes to
//! its best-ranked worker that still has room under a load bound of
//! `ε × capacity share × total load` (plus the largest single host, which keeps every
//! instance feasible). Hosts are placed heaviest first, in a fixed order, so a change in
//! membership only moves the hosts it has to: without the bound exactly the hosts of a
//! leaving worker (or those a joining worker now wins); with it, a few more spill over.
//!
//! Pure and deterministic, like the planner: the coordinator calls it on membership or
//! load changes and diffs the result against the previous assignment.

use std::collections::HashMap;
use xxhash_rust::xxh3::xxh3_64;

/// A worker and its capacity (any unit, e.g. fetches per second).
#[derive(Clone, Debug, PartialEq)]
pub struct Worker {
    /// Stable worker id.
    pub id: String,
    /// Relative capacity (> 0).
    pub capacity: f64,
}

/// A host and its load (e.g. planned fetches per day).
#[derive(Clone, Debug, PartialEq)]
pub struct Host {
    /// Host name (the politeness group).
    pub name: String,
    /// Load (≥ 0).
    pub load: f64,
}

/// Why no assignment exists.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ShardError {
    /// There are hosts but no worker with positive capacity.
    #[error("no worker with positive capacity to take {0} hosts")]
    NoWorkers(usize),
}

/// Worker index per host (same order as the input hosts), and each worker's load.
#[derive(Clone, Debug, PartialEq)]
pub struct Assignment {
    /// `owner[h]` is the index of host `h`'s worker.
    pub owner: Vec<usize>,
    /// Summed load per worker.
    pub load: Vec<f64>,
}

fn score(host: &str, worker: &Worker) -> f64 {
    let mut key = Vec::with_capacity(host.len() + worker.id.len() + 1);
    key.extend_from_slice(host.as_bytes());
    key.push(0);
    key.extend_from_slice(worker.id.as_bytes());
    // 53 random bits → u ∈ (0, 1), never 0 or 1.
    let u = ((xxh3_64(&key) >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    -worker.capacity / u.ln()
}

/// Assigns every host to a worker. `epsilon ≥ 1` bounds each worker's load at
/// `epsilon × its capacity share × total load + largest host load`; `f64::INFINITY`
/// disables the bound (pure rendezvous hashing).
pub fn assign(hosts: &[Host], workers: &[Worker], epsilon: f64) -> Result<Assignment, ShardError> {
    assert!(epsilon >= 1.0, "epsilon below 1 cannot fit every host");
    let live: Vec<usize> = (0..workers.len())
        .filter(|&w| workers[w].capacity > 0.0)
        .collect();
    if live.is_empty() {
        return if hosts.is_empty() {
            Ok(Assignment {
                owner: Vec::new(),
                load: vec![0.0; workers.len()],
            })
        } else {
            Err(ShardError::NoWorkers(hosts.len()))
        };
    }
    let total_load: f64 = hosts.iter().map(|h| h.load.max(0.0)).sum();
    let total_cap: f64 = live.iter().map(|&w| workers[w].capacity).sum();
    let biggest = hosts.iter().map(|h| h.load.max(0.0)).fold(0.0, f64::max);
    let cap = |w: usize| epsilon * workers[w].capacity / total_cap * total_load + biggest;
    // Heaviest first so big hosts find room; ties by name for a fixed order.
    let mut order: Vec<usize> = (0..hosts.len()).collect();
    order.sort_by(|&a, &b| {
        hosts[b]
            .load
            .total_cmp(&hosts[a].load)
            .then_with(|| hosts[a].name.cmp(&hosts[b].name))
    });
    let mut owner = vec![usize::MAX; hosts.len()];
    let mut load = vec![0.0; workers.len()];
    let mut ranked: Vec<(f64, usize)> = Vec::with_capacity(live.len());
    for h in order {
        ranked.clear();
        ranked.extend(
            live.iter()
                .map(|&w| (score(&hosts[h].name, &workers[w]), w)),
        );
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        let l = hosts[h].load.max(0.0);
        // The bound includes the largest host, so some worker always has room.
        let w = ranked
            .iter()
            .map(|&(_, w)| w)
            .find(|&w| load[w] + l <= cap(w) + 1e-9)
            .unwrap_or(ranked[0].1);
        owner[h] = w;
        load[w] += l;
    }
    Ok(Assignment { owner, load })
}

/// Hosts whose owner changed between two assignments of the same hosts, by worker id.
pub fn moved(
    hosts: &[Host],
    before: (&Assignment, &[Worker]),
    after: (&Assignment, &[Worker]),
) -> Vec<String> {
    let by_name: HashMap<&str, &str> = hosts
        .iter()
        .zip(&before.0.owner)
        .map(|(h, &w)| (h.name.as_str(), before.1[w].id.as_str()))
        .collect();
    hosts
        .iter()
        .zip(&after.0.owner)
        .filter(|(h, &w)| by_name.get(h.name.as_str()) != Some(&after.1[w].id.as_str()))
        .map(|(h, _)| h.name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hosts(n: usize, skew: bool) -> Vec<Host> {
        (0..n)
            .map(|i| Host {
                name: format!("host-{i}.example"),
                load: if skew {
                    1.0 + (i % 17) as f64 * (i % 5) as f64
                } else {
                    1.0
                },
            })
            .collect()
    }

    fn workers(ids: &[usize], cap: impl Fn(usize) -> f64) -> Vec<Worker> {
        ids.iter()
            .map(|&i| Worker {
                id: format!("w{i}"),
                capacity: cap(i),
            })
            .collect()
    }

    #[test]
    fn shares_follow_capacity() {
        let h = hosts(6000, false);
        let w = workers(&[0, 1, 2], |i| [1.0, 2.0, 3.0][i]);
        let a = assign(&h, &w, f64::INFINITY).unwrap();
        let share: Vec<f64> = a.load.iter().map(|l| l / 6000.0).collect();
        for (s, want) in share.iter().zip([1.0 / 6.0, 2.0 / 6.0, 3.0 / 6.0]) {
            assert!((s - want).abs() < 0.03, "{share:?}");
        }
    }

    #[test]
    fn unbounded_leave_and_join_move_only_what_they_must() {
        let h = hosts(2000, true);
        let four = workers(&[0, 1, 2, 3], |_| 1.0);
        let a4 = assign(&h, &four, f64::INFINITY).unwrap();
        // Worker w2 leaves: exactly its hosts move.
        let three = workers(&[0, 1, 3], |_| 1.0);
        let a3 = assign(&h, &three, f64::INFINITY).unwrap();
        let moved_hosts = moved(&h, (&a4, &four), (&a3, &three));
        let had: Vec<String> = h
            .iter()
            .zip(&a4.owner)
            .filter(|(_, &w)| four[w].id == "w2")
            .map(|(h, _)| h.name.clone())
            .collect();
        assert_eq!(moved_hosts, had);
        // Worker w4 joins: only hosts it now wins move, all to it.
        let five = workers(&[0, 1, 2, 3, 4], |_| 1.0);
        let a5 = assign(&h, &five, f64::INFINITY).unwrap();
        for name in moved(&h, (&a4, &four), (&a5, &five)) {
            let i = h.iter().position(|x| x.name == name).unwrap();
            assert_eq!(five[a5.owner[i]].id, "w4");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(60))]

        #[test]
        fn bounded_loads_and_small_moves(n in 50usize..400, k in 2usize..8, skew in any::<bool>(), eps in 1.05f64..2.0) {
            let h = hosts(n, skew);
            let w = workers(&(0..k).collect::<Vec<_>>(), |i| 1.0 + (i % 3) as f64);
            let a = assign(&h, &w, eps).unwrap();
            let total: f64 = h.iter().map(|x| x.load).sum();
            let cap_total: f64 = w.iter().map(|x| x.capacity).sum();
            let biggest = h.iter().map(|x| x.load).fold(0.0, f64::max);
            for (i, l) in a.load.iter().enumerate() {
                prop_assert!(*l <= eps * w[i].capacity / cap_total * total + biggest + 1e-6);
            }
            prop_assert!((a.load.iter().sum::<f64>() - total).abs() < 1e-6);
            // One worker leaves: its load must move; everything else should mostly stay.
            let rest: Vec<Worker> = w[1..].to_vec();
            let b = assign(&h, &rest, eps).unwrap();
            let moved_load: f64 = moved(&h, (&a, &w), (&b, &rest)).iter()
                .map(|name| h.iter().find(|x| &x.name == name).unwrap().load).sum();
            prop_assert!(moved_load >= a.load[0] - 1e-6);
            prop_assert!(moved_load <= 3.0 * a.load[0] + 2.0 * biggest + 1e-6,
                "moved {} for a departing load of {}", moved_load, a.load[0]);
        }
    }

    #[test]
    fn no_workers_is_an_error_and_no_hosts_is_fine() {
        assert_eq!(
            assign(&hosts(3, false), &[], 1.25),
            Err(ShardError::NoWorkers(3))
        );
        assert_eq!(
            assign(&[], &workers(&[0], |_| 1.0), 1.25).unwrap().owner,
            Vec::<usize>::new()
        );
    }
}
