//! What `replay` prints and writes besides its day table: the fetch log, the plans'
//! calibration and each policy's figure per window.

use super::*;

/// Writes fetch times per feed as CSV rows `feed_id,ts` (seconds from the trace start).
pub(super) fn write_fetch_log(
    path: &std::path::Path,
    trace: &Trace,
    fetches: &[Vec<f64>],
) -> Result<()> {
    use std::io::Write;
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut w = std::io::BufWriter::new(file);
    writeln!(w, "feed_id,ts")?;
    for (f, times) in fetches.iter().enumerate() {
        for t in times {
            writeln!(w, "{},{t:.1}", trace.feeds[f].id)?;
        }
    }
    w.flush()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Prints how the plans' promise for the postings that came compares with the live delay
/// on the days from `from` on (see [`crate::calibration`]).
pub(super) fn print_calibration(rows: &[DayRow], from: usize) {
    let (mut days, mut within, mut consistent) = (0, 0, 0);
    let (mut live, mut promised) = (0.0, 0.0);
    for r in rows.iter().skip(from) {
        let Some(cal) = r.calibration else {
            continue;
        };
        let expected = cal.expected_min;
        let realized = r.live.avg_delay_min;
        days += 1;
        within += usize::from((realized - expected).abs() <= 0.15 * expected);
        consistent += usize::from(cal.consistent(realized, 0.15));
        live += realized * r.live.postings as f64;
        promised += expected * r.live.postings as f64;
    }
    if days > 0 {
        println!(
            "
calibration, days {from}+: the live delay within 15% of the plans' promise for the postings that came on {within} of {days} days, within 15% or two standard errors (draws clustered by finding fetch and by instant) on {consistent}; live / promise over those days {:.3}",
            live / promised
        );
    }
}

/// Prints each policy's figure over day 0, days 1–6, 7–13 and 14 to the end (those the
/// replay covers), with the fetches it made, and Kairos against the best tuned peer.
pub(super) fn print_windows(
    trace: &Trace,
    rows: &[DayRow],
    live: &[Vec<f64>],
    peers: &[PeerLog],
    metric: Metric,
    days: usize,
    live_fetches: u64,
) {
    let windows: Vec<(usize, usize)> = [(0, 1), (1, 7), (7, 14), (14, days)]
        .into_iter()
        .map(|(s, e)| (s, e.min(days)))
        .filter(|(s, e)| s < e)
        .collect();
    let name = |(s, e): (usize, usize)| {
        if e - s == 1 {
            format!("day {s}")
        } else {
            format!("days {s}-{}", e - 1)
        }
    };
    let span = |(s, e): (usize, usize)| (s as f64 * DAY, e as f64 * DAY);
    let n = trace.feeds.len() as f64;
    let mut table: Vec<(String, Vec<f64>, f64)> = Vec::new();
    let per_feed_day = |fetches: u64| fetches as f64 / n / days as f64;
    table.push((
        "kairos (live)".into(),
        windows
            .iter()
            .map(|&w| {
                let (s, e) = span(w);
                let r = window(trace, live, s, e);
                // A window with nothing to measure has no figure, as the references' pooled
                // days have none (`-`), not a delay of zero.
                let measured = match metric {
                    Metric::Delay => r.postings,
                    Metric::Miss | Metric::AccessDelay => r.accesses,
                };
                if measured > 0 {
                    r.objective(metric)
                } else {
                    f64::NAN
                }
            })
            .collect(),
        per_feed_day(live_fetches),
    ));
    let pooled_rows = |f: &dyn Fn(&DayRow) -> Option<&Realized>| -> Vec<f64> {
        windows
            .iter()
            .map(|&(s, e)| pooled(rows[s..e].iter().filter_map(f), metric))
            .collect()
    };
    table.push((
        "offline (same history)".into(),
        pooled_rows(&|r| r.offline_causal.as_ref()),
        f64::NAN,
    ));
    let has_truth = rows.iter().any(|r| r.truth.is_some());
    if has_truth {
        table.push((
            "truth (generating intensities)".into(),
            pooled_rows(&|r| r.truth.as_ref()),
            f64::NAN,
        ));
    }
    let uniform_fetches: u64 = rows.iter().map(|r| r.uniform.fetches).sum();
    table.push((
        "uniform".into(),
        pooled_rows(&|r| Some(&r.uniform)),
        per_feed_day(uniform_fetches),
    ));
    for (i, p) in peers.iter().enumerate() {
        table.push((
            p.label(),
            pooled_rows(&|r| Some(&r.peers[i].1)),
            per_feed_day(fetches_before(&p.log, days as f64 * DAY)),
        ));
    }
    println!("\nby window ({})", metric);
    print!("{:<36}", "policy");
    for &w in &windows {
        print!("{:>12}", name(w));
    }
    println!(" {:>15}", "fetches/feed/day");
    for (label, figures, fpd) in &table {
        print!("{label:<36}");
        for v in figures {
            if v.is_finite() {
                print!("{v:>12.2}");
            } else {
                // Nothing measured: no posting of the window was ever fetched.
                print!("{:>12}", "-");
            }
        }
        if fpd.is_finite() {
            println!("{fpd:>16.3}");
        } else {
            // The offline reference is a plan per day, not a run: its fetches are each day's.
            println!("{:>16}", "-");
        }
    }
    // Kairos against the best tuned peer in each window.
    print!("{:<36}", "kairos / best tuned peer");
    let mut any = false;
    for (k, _) in windows.iter().enumerate() {
        let best = table
            .iter()
            .filter(|(l, _, _)| l.ends_with("(tuned)"))
            .map(|(_, f, _)| f[k])
            .filter(|v| v.is_finite())
            .fold(f64::INFINITY, f64::min);
        any |= best.is_finite();
        if best.is_finite() {
            print!("{:>12.3}", table[0].1[k] / best);
        } else {
            print!("{:>12}", "-");
        }
    }
    println!();
    if !any {
        println!("(no peer ran: --peers none)");
    }
    if has_truth {
        print!("{:<36}", "kairos / truth");
        for k in 0..windows.len() {
            print!("{:>12.3}", table[0].1[k] / table[2].1[k]);
        }
        println!();
    }
}

/// What [`print_peers`] says of the peers' tuning.
pub(super) struct PeerSettings {
    /// The bounds each tuned peer was held to.
    pub budget: PeerBudget,
    /// The flag that chose them.
    pub budget_arg: PeerBudgetArg,
    /// The live run's fetches on the scored days.
    pub live_scored: u64,
    /// The live run's fetches from day 0 to the end of the scored days.
    pub live_fetches: u64,
    /// The scored days, trace seconds.
    pub scored: (f64, f64),
    /// The first scored day.
    pub train_days: usize,
    /// Days replayed.
    pub days: usize,
    /// Seconds the peers' runs took.
    pub seconds: f64,
}

/// Prints how each peer was tuned, what it spent and the postings it lost on the scored
/// days, beside the live run's.
pub(super) fn print_peers(rows: &[DayRow], peers: &[PeerLog], s: &PeerSettings) {
    let (from, to) = s.scored;
    let also = match s.budget_arg {
        PeerBudgetArg::Scored => String::new(),
        PeerBudgetArg::Both => format!(
            " and at most its {} fetches of days 0 to {}",
            s.live_fetches,
            s.days.saturating_sub(1)
        ),
    };
    println!(
        "peers: each with its shipped defaults and tuned: its interval settings scaled to spend on days {}+ the live run's {} fetches of those days{also}, the ratio of quiet to busy feeds' settings chosen in hindsight on them ({:.1} s)",
        s.train_days, s.live_scored, s.seconds
    );
    // What the delay figures do not show: a posting that scrolled off is counted at the
    // next fetch as if it had been seen, so a scheduler that lets documents overflow
    // looks better there than it is to a reader.
    // The days' own counts, summed over the scored days (`from` is the first one's start).
    let scored = &rows[((from / DAY) as usize).min(rows.len())..];
    println!(
        "  {:<26} postings scrolled off on those days: {}",
        "kairos (live)",
        scored.iter().map(|r| r.scrolled_off.live).sum::<usize>()
    );
    for (i, p) in peers.iter().enumerate().filter(|(_, p)| p.tuned) {
        let lost: usize = scored.iter().map(|r| r.peers_scrolled_off[i]).sum();
        let fetched = fetches_in(&p.log, from, to);
        // The search assumes fewer fetches at larger settings; a rule for which that
        // does not hold (Nutch's adaptive interval: its runs jump between a storm and
        // well below the budget) can be left short, and is shown so.
        let counted = s.budget.count(fetched, fetches_before(&p.log, to));
        let short = if counted < s.live_scored
            && !kairos_coordinator::peers::reaches(counted, s.live_scored)
        {
            " (below the budget: the search found no setting that spends it without passing it)"
        } else {
            ""
        };
        println!(
            "  {:<26} busy-feed settings ×{:.3}, quiet-feed settings ×{:.3}, {fetched} fetches on those days{short}, {} in all; postings scrolled off on those days: {lost}",
            p.peer.name(),
            p.knobs.fast,
            p.knobs.slow,
            fetches_before(&p.log, to),
        );
    }
}

/// A run's delay per posting over some days with every posting it lost to a full document
/// charged `hours` of delay on top of the delay it is counted at (the fetch after it
/// scrolled off): the figure the plans minimize (docs/PLANNER.md, "Lost postings").
/// NaN when no posting was found.
pub(super) fn priced_delay_min<'a>(
    days: impl IntoIterator<Item = (&'a Realized, usize)>,
    hours: f64,
) -> f64 {
    let (mut sum, mut postings) = (0.0, 0usize);
    for (r, lost) in days {
        sum += r.avg_delay_min * r.postings as f64 + lost as f64 * hours * 60.0;
        postings += r.postings;
    }
    if postings > 0 {
        sum / postings as f64
    } else {
        f64::NAN
    }
}

/// Prints the live run and each tuned peer on the days from `from` on with their lost
/// postings priced ([`priced_delay_min`]), and Kairos against the best peer so priced.
/// `whose` says where the price comes from.
pub(super) fn print_priced(
    rows: &[DayRow],
    peers: &[PeerLog],
    from: usize,
    hours: f64,
    whose: &str,
) {
    let scored = &rows[from.min(rows.len())..];
    let live = priced_delay_min(scored.iter().map(|r| (&r.live, r.scrolled_off.live)), hours);
    if !live.is_finite() {
        return;
    }
    let best = peers
        .iter()
        .enumerate()
        .filter(|(_, p)| p.tuned)
        .map(|(i, p)| {
            let priced = priced_delay_min(
                scored
                    .iter()
                    .map(|r| (&r.peers[i].1, r.peers_scrolled_off[i])),
                hours,
            );
            (p.peer.name(), priced)
        })
        .filter(|(_, v)| v.is_finite())
        .min_by(|a, b| a.1.total_cmp(&b.1));
    if let Some((name, best)) = best {
        println!(
            "with each lost posting charged {hours} h of delay ({whose}), days {from}+: kairos (live) {live:.2} min, best tuned peer {best:.2} min ({name}); kairos / best tuned peer, losses priced {:.3}",
            live / best
        );
    }
}

/// Prints how much the plans asked of their days against the day's budget (rounds from day
/// 1, each plan's next seven days): a day asked more than its budget is held to later days
/// by the workers' allowances, the plan not executed as made.
pub(super) fn print_day_shares(shares: &[(f64, f64)]) {
    if shares.is_empty() {
        return;
    }
    let mut busiest: Vec<f64> = shares.iter().map(|s| s.1).collect();
    busiest.sort_by(f64::total_cmp);
    let quietest = shares.iter().map(|s| s.0).fold(f64::INFINITY, f64::min);
    let over = busiest
        .iter()
        .filter(|&&b| b > kairos_coordinator::hub::DAY_OVER_BUDGET)
        .count();
    println!(
        "plans' days against the day's budget (each round from day 1, its next 7 days): busiest day median {:.3}, highest {:.3}; quietest day lowest {:.3}; rounds with a day over {}: {over} of {}",
        busiest[busiest.len() / 2],
        busiest[busiest.len() - 1],
        quietest,
        kairos_coordinator::hub::DAY_OVER_BUDGET,
        shares.len()
    );
}

/// The live run's fetches per minute over `[from, to)` (seconds): the busiest minute against
/// the mean, and with a cap (`--max-fetches-per-minute`) the minutes above it. First-sight
/// fetches, catch-ups and updates between rounds are counted with the planned ones: this is
/// what the workers would have started.
pub(super) fn print_minutes(
    fetches: &[Vec<f64>],
    besides_plan: &[(f64, f64)],
    from: f64,
    to: f64,
    cap: Option<f64>,
    deferred: u64,
) {
    let minutes = ((to - from) / 60.0).ceil().max(0.0) as usize;
    if minutes == 0 {
        return;
    }
    let count = |times: &mut dyn Iterator<Item = f64>| -> Vec<u32> {
        let mut per = vec![0u32; minutes];
        for t in times {
            if (from..to).contains(&t) {
                per[((t - from) / 60.0) as usize] += 1;
            }
        }
        per
    };
    let per = count(&mut fetches.iter().flatten().copied());
    let extra = count(&mut besides_plan.iter().map(|&(t, _)| t));
    let total: u64 = per.iter().map(|&c| u64::from(c)).sum();
    let busiest = per.iter().copied().max().unwrap_or(0);
    let above = match cap {
        Some(c) => {
            // Of the fetches above the cap, those the plan's own times put there (the
            // minute's planned fetches alone above it) and those the fetches besides the
            // plan added.
            let (mut minutes_over, mut by_plan, mut by_extra) = (0, 0.0, 0.0);
            for (&n, &e) in per.iter().zip(&extra) {
                let over = f64::from(n) - c;
                if over > 1e-9 {
                    minutes_over += 1;
                    let plan = (f64::from(n - e) - c).max(0.0);
                    by_plan += plan;
                    by_extra += over - plan;
                }
            }
            let scored: Vec<f64> = besides_plan
                .iter()
                .filter(|(t, _)| (from..to).contains(t))
                .map(|&(_, w)| w)
                .collect();
            let waited = scored.iter().sum::<f64>() / scored.len().max(1) as f64 / 60.0;
            format!(
                "; minutes above the cap of {c}: {minutes_over}, fetches above it {:.0} \
                 ({by_plan:.0} on the plan's times, {by_extra:.0} besides them); fetches \
                 besides the plan held to a later minute: {deferred} (the {} besides the \
                 plan on these days waited {waited:.1} min on average)",
                by_plan + by_extra,
                scored.len()
            )
        }
        None => String::new(),
    };
    println!(
        "fetches per minute on the scored days: busiest {busiest}, mean {:.2}{above}",
        total as f64 / minutes as f64
    );
}
