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
//! A host the bound spilled past its first-ranked worker lands wherever room was left when
//! its turn came, which depends on every heavier host's load: dealt again under loads that
//! drifted, it can land elsewhere although no worker came or went. [`assign_keeping`] takes
//! the last deal's choices ([`Previous`]) and keeps each spilled host with the worker it
//! went to while that worker has room and the host's first-ranked worker is still the one
//! it spilled from; given the loads the last deal saw, it reproduces that deal exactly.
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
    /// `first[h]` is the index of host `h`'s first-ranked worker: where it would go without
    /// the bound. A host whose owner differs was spilled.
    pub first: Vec<usize>,
    /// Summed load per worker.
    pub load: Vec<f64>,
}

/// What the last deal chose for a host, by worker index into this deal's workers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Previous {
    /// The worker it went to.
    pub owner: usize,
    /// Its first-ranked worker then (the same as `owner` unless the bound spilled it).
    pub first: usize,
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
    assign_keeping(hosts, workers, epsilon, &[])
}

/// [`assign`], keeping spilled hosts where the last deal put them: host `h` with
/// `previous[h] = Some(p)` (a shorter slice reads as `None` past its end) goes to `p.owner`
/// when its first-ranked worker is still `p.first` and `p.owner` has room; otherwise, and
/// for every other host, the rule of [`assign`] holds. So a worker that joined and now
/// ranks first for a host still takes it (the host's first-ranked worker changed), and a
/// host the last deal did not spill goes to its first-ranked worker when it has room.
pub fn assign_keeping(
    hosts: &[Host],
    workers: &[Worker],
    epsilon: f64,
    previous: &[Option<Previous>],
) -> Result<Assignment, ShardError> {
    assert!(epsilon >= 1.0, "epsilon below 1 cannot fit every host");
    let live: Vec<usize> = (0..workers.len())
        .filter(|&w| workers[w].capacity > 0.0)
        .collect();
    if live.is_empty() {
        return if hosts.is_empty() {
            Ok(Assignment {
                owner: Vec::new(),
                first: Vec::new(),
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
    let mut first = vec![usize::MAX; hosts.len()];
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
        let room = |w: usize| load[w] + l <= cap(w) + 1e-9;
        let top = ranked[0].1;
        let kept = previous
            .get(h)
            .copied()
            .flatten()
            .filter(|p| {
                p.first == top && p.owner < workers.len() && workers[p.owner].capacity > 0.0
            })
            .map(|p| p.owner)
            .filter(|&w| room(w));
        // The bound includes the largest host, so some worker always has room.
        let w = kept.unwrap_or_else(|| {
            ranked
                .iter()
                .map(|&(_, w)| w)
                .find(|&w| room(w))
                .unwrap_or(top)
        });
        owner[h] = w;
        first[h] = top;
        load[w] += l;
    }
    Ok(Assignment { owner, first, load })
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

    fn previous(a: &Assignment) -> Vec<Option<Previous>> {
        a.owner
            .iter()
            .zip(&a.first)
            .map(|(&owner, &first)| Some(Previous { owner, first }))
            .collect()
    }

    /// Every host's load scaled by a factor in [1 − d, 1 + d] drawn from its name.
    fn drifted(h: &[Host], d: f64, seed: u64) -> Vec<Host> {
        h.iter()
            .map(|x| {
                let mut key = x.name.clone().into_bytes();
                key.extend_from_slice(&seed.to_le_bytes());
                let u = (xxh3_64(&key) >> 11) as f64 / (1u64 << 53) as f64;
                Host {
                    name: x.name.clone(),
                    load: x.load * (1.0 - d + 2.0 * d * u),
                }
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(60))]

        #[test]
        fn keeping_reproduces_the_last_deal_and_holds_the_bound_under_drift(
            n in 50usize..400, k in 2usize..8, eps in 1.05f64..1.6, seed in any::<u64>()
        ) {
            let h = hosts(n, true);
            let w = workers(&(0..k).collect::<Vec<_>>(), |i| 1.0 + (i % 3) as f64);
            let a = assign(&h, &w, eps).unwrap();
            // `first` is each host's best-scored worker.
            for (i, &f) in a.first.iter().enumerate() {
                let top = (0..k).max_by(|&x, &y| score(&h[i].name, &w[x])
                    .total_cmp(&score(&h[i].name, &w[y])).then_with(|| y.cmp(&x))).unwrap();
                prop_assert_eq!(f, top);
            }
            // The same loads: the same deal.
            prop_assert_eq!(&assign_keeping(&h, &w, eps, &previous(&a)).unwrap(), &a);
            // Drifted loads: every host placed, the bound held.
            let h2 = drifted(&h, 0.3, seed);
            let b = assign_keeping(&h2, &w, eps, &previous(&a)).unwrap();
            let total: f64 = h2.iter().map(|x| x.load).sum();
            let cap_total: f64 = w.iter().map(|x| x.capacity).sum();
            let biggest = h2.iter().map(|x| x.load).fold(0.0, f64::max);
            prop_assert!(b.owner.iter().all(|&o| o < k));
            for (i, l) in b.load.iter().enumerate() {
                prop_assert!(*l <= eps * w[i].capacity / cap_total * total + biggest + 1e-6);
            }
        }
    }

    #[test]
    fn drifted_loads_move_a_spilled_host_when_dealt_afresh_and_not_when_kept() {
        let h = hosts(300, true);
        let w = workers(&[0, 1, 2], |_| 1.0);
        let eps = 1.1;
        let a = assign(&h, &w, eps).unwrap();
        let spilled = a.owner.iter().zip(&a.first).filter(|(o, f)| o != f).count();
        assert!(spilled > 0, "the bound spills some hosts at ε = {eps}");
        // Find a drift under which a fresh deal moves hosts; keeping must move fewer.
        let (mut fresh_moves, mut kept_moves) = (0, 0);
        for seed in 0..20 {
            let h2 = drifted(&h, 0.2, seed);
            let fresh = assign(&h2, &w, eps).unwrap();
            let kept = assign_keeping(&h2, &w, eps, &previous(&a)).unwrap();
            fresh_moves += moved(&h, (&a, &w), (&fresh, &w)).len();
            kept_moves += moved(&h, (&a, &w), (&kept, &w)).len();
        }
        assert!(fresh_moves > 0, "no drift moved a host");
        assert!(
            kept_moves * 2 < fresh_moves,
            "keeping moved {kept_moves} hosts over 20 drifts, a fresh deal {fresh_moves}"
        );
    }

    #[test]
    fn a_joining_worker_still_takes_the_hosts_it_ranks_first_for_when_keeping() {
        let h = hosts(2000, true);
        let four = workers(&[0, 1, 2, 3], |_| 1.0);
        let a4 = assign(&h, &four, f64::INFINITY).unwrap();
        let five = workers(&[0, 1, 2, 3, 4], |_| 1.0);
        // Indices of the first four are unchanged in `five`.
        let kept = assign_keeping(&h, &five, f64::INFINITY, &previous(&a4)).unwrap();
        assert_eq!(kept, assign(&h, &five, f64::INFINITY).unwrap());
        assert!(kept.owner.contains(&4));
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
