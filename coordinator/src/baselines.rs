//! The schedulers aggregators run today ([`kairos_coordinator::peers`]) as baselines beside Kairos in
//! `replay` and `simulate`: each peer with its shipped defaults and tuned to spend the
//! same fetches as the Kairos run it sits next to, measured on the same postings.

use kairos_coordinator::peers::{self, Knobs, Peer, PeerRun};
use kairos_coordinator::plan::cost::Metric;
use kairos_coordinator::simulate::{replay_log, Realized};
use kairos_coordinator::trace::Trace;

/// One peer's run.
#[derive(Clone, Debug)]
pub struct PeerLog {
    /// The scheduler.
    pub peer: Peer,
    /// Tuned to the budget (false: shipped defaults).
    pub tuned: bool,
    /// The multipliers on the rule's settings.
    pub knobs: Knobs,
    /// Fetch times per feed, seconds from the trace start.
    pub log: Vec<Vec<f64>>,
}

impl PeerLog {
    /// `commafeed` or `commafeed (tuned)`.
    pub fn label(&self) -> String {
        if self.tuned {
            format!("{} (tuned)", self.peer.name())
        } else {
            self.peer.name().to_string()
        }
    }
}

/// Parses `--peers`: `all`, `none`, or a comma-separated list of [`Peer::name`]s.
pub fn parse_peers(list: &str) -> Result<Vec<Peer>, String> {
    match list.trim() {
        "all" => Ok(Peer::ALL.to_vec()),
        "none" | "" => Ok(Vec::new()),
        l => l
            .split(',')
            .map(|p| {
                Peer::parse(p.trim()).ok_or_else(|| {
                    let names: Vec<&str> = Peer::ALL.iter().map(|p| p.name()).collect();
                    format!(
                        "unknown peer `{}` (one of: all, none, {})",
                        p.trim(),
                        names.join(", ")
                    )
                })
            })
            .collect(),
    }
}

/// `--peer-budget` of `replay` and `simulate`: which counts of the compared run's fetches
/// bound a tuned peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PeerBudgetArg {
    /// Its fetches on the scored days.
    Scored,
    /// Those, and its fetches from day 0 to the end of the scored days.
    Both,
}

impl PeerBudgetArg {
    /// The bounds for a run that spent `scored` fetches on the scored days and `whole`
    /// from day 0 to their end.
    pub fn budget(self, scored: u64, whole: u64) -> PeerBudget {
        PeerBudget {
            scored,
            whole: (self == PeerBudgetArg::Both).then_some(whole),
        }
    }
}

/// What a tuned peer may spend: the fetches of the run it is compared with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerBudget {
    /// Fetches on the scored days.
    pub scored: u64,
    /// Fetches from the start to the end of the scored days, when that bound holds too
    /// (`replay --peer-budget both`); `None`: only the scored days are held.
    pub whole: Option<u64>,
}

impl PeerBudget {
    /// A run's fetches as the tuning counts them, on the scale of [`PeerBudget::scored`]:
    /// with both bounds, the tighter of the two (the whole run's count scaled by
    /// scored / whole), so a run that reaches the target passes neither bound and is
    /// within 3% of the one that binds.
    pub fn count(&self, scored: u64, whole: u64) -> u64 {
        match self.whole {
            Some(w) if w > 0 => {
                let scaled = (whole as f64 * self.scored as f64 / w as f64).ceil() as u64;
                scored.max(scaled)
            }
            _ => scored,
        }
    }
}

/// Every peer of `peers` twice, with its defaults and tuned: run over `duration` seconds,
/// spending `budget.scored` fetches on the scored days `[scored.0, scored.1)` (the same
/// budget over the same days as what it is compared with; a peer tuned on the whole run's
/// count alone starved the first days and spent up to twice the budget on the scored ones)
/// and, when `budget.whole` is set, at most that many before the scored days end, and
/// scored by `metric` there.
pub fn run_peers(
    trace: &Trace,
    peers: &[Peer],
    duration: f64,
    document_items: usize,
    budget: PeerBudget,
    metric: Metric,
    scored: (f64, f64),
) -> Vec<PeerLog> {
    let target_fetches = budget.scored;
    // The run may go on past the scored days, so their last postings are all found.
    let (score_from, score_to) = (scored.0, scored.1.min(duration));
    let base = PeerRun {
        duration,
        document_items,
        knobs: Knobs::DEFAULT,
        max_fetches: None,
    };
    let from = if score_from < score_to {
        score_from
    } else {
        0.0
    };
    let score = |log: &[Vec<f64>]| window(trace, log, from, score_to).objective(metric);
    let count = |log: &[Vec<f64>]| {
        budget.count(
            fetches_in(log, from, score_to),
            fetches_before(log, score_to),
        )
    };
    // Probes cut short at twice the target's rate over the whole run.
    let cap = (2.0 * target_fetches as f64 * duration / (score_to - from).max(1.0)) as u64 + 10_000;
    let tuning = PeerRun {
        max_fetches: Some(cap),
        ..base
    };
    let mut out = Vec::with_capacity(peers.len() * 2);
    for &peer in peers {
        let log = peers::run(trace, peer, &base);
        out.push(PeerLog {
            peer,
            tuned: false,
            knobs: Knobs::DEFAULT,
            log,
        });
        let t = peers::tune(trace, peer, &tuning, target_fetches, &count, &score);
        out.push(PeerLog {
            peer,
            tuned: true,
            knobs: t.knobs,
            log: t.log,
        });
    }
    out
}

/// Fetches made before `end` (trace seconds), over every feed's log.
pub fn fetches_before(log: &[Vec<f64>], end: f64) -> u64 {
    log.iter()
        .map(|f| f.partition_point(|&t| t < end) as u64)
        .sum()
}

/// Fetches made in `[from, to)` (trace seconds), over every feed's log.
pub fn fetches_in(log: &[Vec<f64>], from: f64, to: f64) -> u64 {
    fetches_before(log, to).saturating_sub(fetches_before(log, from))
}

/// Days a run goes on past its scored ones: long enough for the slowest feed's next fetch
/// (one at the minimum rate), so the last scored day's postings are all found rather than
/// cut off at the run's end.
pub fn drain_days(min_fetches_per_day: f64) -> f64 {
    (1.0 / min_fetches_per_day).ceil().clamp(1.0, 30.0) + 1.0
}

/// A log's figures over `[start, end)`.
pub fn window(trace: &Trace, log: &[Vec<f64>], start: f64, end: f64) -> Realized {
    replay_log(trace, log, start, end).0
}

/// Days' figures pooled into one: delays weighted by postings, per-access figures by
/// accesses (NaN when nothing was measured).
pub fn pooled<'a>(days: impl IntoIterator<Item = &'a Realized>, metric: Metric) -> f64 {
    let (mut sum, mut weight) = (0.0, 0.0);
    for r in days {
        let w = match metric {
            Metric::Delay => r.postings as f64,
            Metric::Miss | Metric::AccessDelay => r.accesses as f64,
        };
        sum += r.objective(metric) * w;
        weight += w;
    }
    if weight > 0.0 {
        sum / weight
    } else {
        f64::NAN
    }
}

#[cfg(test)]
mod tests {
    use super::PeerBudget;

    #[test]
    fn the_tighter_bound_counts() {
        let scored_only = PeerBudget {
            scored: 100,
            whole: None,
        };
        assert_eq!(scored_only.count(90, 1_000), 90);
        let both = PeerBudget {
            scored: 100,
            whole: Some(200),
        };
        // Within the whole run's bound: the scored days count.
        assert_eq!(both.count(97, 150), 97);
        // Past it: the whole run's count on the scored days' scale, so reaching the
        // target means spending the whole run's bound.
        assert_eq!(both.count(80, 210), 105);
        assert_eq!(both.count(80, 200), 100);
        assert_eq!(both.count(80, 199), 100);
        // A whole-run bound of zero holds nothing (nothing was spent to compare with).
        let empty = PeerBudget {
            scored: 0,
            whole: Some(0),
        };
        assert_eq!(empty.count(5, 5), 5);
    }
}
