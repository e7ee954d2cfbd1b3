//! Compact per-feed rate patterns and their expansion onto the slot grid.
//!
//! The planner stores a feed's learned rates as a few dozen hourly bins (expected postings
//! or accesses per bin per period) and expands them to `N` slots only while solving it, so
//! a plan over 100,000 feeds never holds 100,000 slot-resolution tables at once.

/// How hourly bins are spread onto slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Smoothing {
    /// Each bin's mass spread evenly over its slots (a step function).
    Step,
    /// Rates interpolated linearly between bin centres around the cycle, rescaled so
    /// the period's total mass is the bins' total.
    Linear,
}

impl std::str::FromStr for Smoothing {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "step" => Ok(Smoothing::Step),
            "linear" => Ok(Smoothing::Linear),
            other => Err(format!(
                "unknown smoothing `{other}` (expected step or linear)"
            )),
        }
    }
}

/// Expands `bins` (mass per bin per period) onto `n` slots (mass per slot per period).
///
/// Works for any `n` and any bin count; slots straddling bins take their share of each.
pub fn expand(bins: &[f32], n: usize, smoothing: Smoothing, out: &mut Vec<f64>) {
    out.clear();
    let nb = bins.len();
    if nb == 0 {
        out.resize(n, 0.0);
        return;
    }
    let total: f64 = bins.iter().map(|&b| b as f64).sum();
    match smoothing {
        Smoothing::Step => {
            // Slot j covers [j, j+1)·(nb/n) in bin units.
            let scale = nb as f64 / n as f64;
            for j in 0..n {
                let (a, b) = (j as f64 * scale, (j + 1) as f64 * scale);
                let mut mass = 0.0;
                let mut x = a;
                while x < b - 1e-12 {
                    let bin = (x.floor() as usize).min(nb - 1);
                    let edge = ((bin + 1) as f64).min(b);
                    mass += bins[bin] as f64 * (edge - x);
                    x = edge;
                }
                out.push(mass);
            }
        }
        Smoothing::Linear => {
            // Density at bin centre i is bins[i]; evaluate at slot centres and rescale. The
            // bins and weights of each slot depend only on the bin and slot counts, and a
            // plan expands every feed many times at the same counts: they are computed once
            // per thread and reused.
            LINEAR_WEIGHTS.with(|cell| {
                let mut cached = cell.borrow_mut();
                if cached
                    .as_ref()
                    .is_none_or(|w| w.bins != nb || w.slots.len() != n)
                {
                    *cached = Some(LinearWeights::new(nb, n));
                }
                let weights = cached.as_ref().expect("just set");
                out.resize(n, 0.0);
                let mut sum = 0.0;
                for (v, &(i0, i1, frac)) in out.iter_mut().zip(&weights.slots) {
                    let (b0, b1) = (bins[i0 as usize] as f64, bins[i1 as usize] as f64);
                    *v = (b0 * (1.0 - frac) + b1 * frac).max(0.0);
                    sum += *v;
                }
                if sum > 0.0 {
                    let k = total / sum;
                    out.iter_mut().for_each(|v| *v *= k);
                }
            });
        }
    }
}

/// Per slot, the two bins whose centres it lies between and the weight of the second
/// ([`Smoothing::Linear`]).
struct LinearWeights {
    bins: usize,
    slots: Vec<(u32, u32, f64)>,
}

impl LinearWeights {
    fn new(nb: usize, n: usize) -> LinearWeights {
        let scale = nb as f64 / n as f64;
        let slots = (0..n)
            .map(|j| {
                // Position in bin-centre units. It lies in (−0.5, nb − 0.5), so its floor
                // is −1 … nb − 1, and the neighbouring bins wrap around the cycle.
                let x = (j as f64 + 0.5) * scale - 0.5;
                let i0 = x.floor();
                let frac = x - i0;
                let i0 = if i0 < 0.0 {
                    nb - 1
                } else {
                    (i0 as usize).min(nb - 1)
                };
                let i1 = if i0 + 1 == nb { 0 } else { i0 + 1 };
                (i0 as u32, i1 as u32, frac)
            })
            .collect();
        LinearWeights { bins: nb, slots }
    }
}

thread_local! {
    static LINEAR_WEIGHTS: std::cell::RefCell<Option<LinearWeights>> =
        const { std::cell::RefCell::new(None) };
}

/// Postings that come at one time of day: a feed published by a timer (a nightly build's
/// version bump, a digest, a podcast) posts within minutes of the same clock time day after
/// day. Hourly bins spread that minute over an hour or more, and a plan made from them
/// fetches an hour or two late every day; a peak puts `share` of the feed's postings in the
/// window of the day it names and leaves the bins to say how many postings there are, so
/// every sum of a model's bins (its rate) is the same with or without one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Peak {
    /// Start of the window, as a share of a day in `[0, 1)`.
    pub start: f32,
    /// Its length, as a share of a day, in `(0, 1)`.
    pub width: f32,
    /// The share of the feed's postings that come in the window, in `(0, 1]`.
    pub share: f32,
}

/// Expands a feed's posting bins onto `n` slots with each of `peaks`' share of their mass
/// in its window on each of the period's `days` days (a feed on a timer has one window, a
/// morning and an evening digest two). The bins count a window's postings in the hours that
/// hold it, so that share is first taken out of those hours (in proportion to the window's
/// overlap with each), and what they hold too little of, out of every hour alike: left in,
/// the window's postings would stay smeared over the hours around it, and the rest of the
/// feed's day would look busiest just after the window. The total is unchanged; peaks of
/// which one is not finite or not within its ranges, or whose shares sum past one, are
/// ignored.
pub fn expand_with_peaks(
    bins: &[f32],
    peaks: &[Peak],
    days: usize,
    n: usize,
    smoothing: Smoothing,
    out: &mut Vec<f64>,
) {
    let days = days.max(1);
    let valid = |p: &Peak| {
        let (start, width, share) = (p.start as f64, p.width as f64, p.share as f64);
        (0.0..1.0).contains(&start) && width > 0.0 && width < 1.0 && share > 0.0 && share <= 1.0
    };
    let total: f64 = bins.iter().map(|&b| b.max(0.0) as f64).sum();
    let shares: f64 = peaks.iter().map(|p| p.share as f64).sum();
    if peaks.is_empty()
        || !peaks.iter().all(valid)
        || shares > 1.0 + 1e-6
        || n == 0
        || !(total > 0.0 && total.is_finite())
    {
        return expand(bins, n, smoothing, out);
    }
    // Each window's postings a day.
    let mass = |p: &Peak| p.share as f64 * total / days as f64;
    // The windows' postings out of the bins that hold them.
    let mut rest: Vec<f32> = bins.iter().map(|&b| b.max(0.0)).collect();
    let nb = rest.len();
    let mut short = 0.0f64;
    over_peaks(peaks, days, nb, mass, |at, take| {
        let held = rest[at] as f64;
        rest[at] = (held - take).max(0.0) as f32;
        short += (take - held).max(0.0);
    });
    let left: f64 = rest.iter().map(|&b| b as f64).sum();
    if short > 0.0 && left > 0.0 {
        let k = ((left - short) / left).max(0.0) as f32;
        rest.iter_mut().for_each(|b| *b *= k);
    }
    expand(&rest, n, smoothing, out);
    // Each slot takes the mass of the part of each window it covers.
    over_peaks(peaks, days, n, mass, |at, put| out[at] += put);
}

/// Walks each of `peaks`' windows on each of the period's `days` days over `units` cells
/// spanning the period: `visit(cell, the part of the window's daily `mass` in it)`.
fn over_peaks(
    peaks: &[Peak],
    days: usize,
    units: usize,
    mass: impl Fn(&Peak) -> f64,
    mut visit: impl FnMut(usize, f64),
) {
    for p in peaks {
        let m = mass(p);
        for d in 0..days {
            over_window(
                d as f64 + p.start as f64,
                p.width as f64,
                units as f64 / days as f64,
                units,
                |at, part| visit(at, m * part),
            );
        }
    }
}

/// Walks a window of `width` days from day `from` (both in days from the period's start)
/// over `units` cells of `per_day` to a day, wrapping past the period's end: `visit(cell,
/// share of the window in it)` for each cell it covers.
fn over_window(
    from: f64,
    width: f64,
    per_day: f64,
    units: usize,
    mut visit: impl FnMut(usize, f64),
) {
    let (a, b) = (from * per_day, (from + width) * per_day);
    let mut x = a;
    while x < b - 1e-12 {
        let cell = x.floor();
        let edge = (cell + 1.0).min(b);
        visit((cell as usize) % units, (edge - x) / (b - a));
        x = edge;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peak_moves_its_share_from_its_hour_into_its_window_on_every_day() {
        // A week of hourly bins, 0.5 an hour; half the postings between 04:15 and 04:30.
        let bins = vec![0.5f32; 168];
        let peak = Peak {
            start: (4.25 / 24.0) as f32,
            width: (0.25 / 24.0) as f32,
            share: 0.5,
        };
        // 10-minute slots: slot 25 of a day is 04:10–04:20, 26 is 04:20–04:30.
        let n = 7 * 144;
        let mut out = Vec::new();
        expand_with_peaks(&bins, &[peak], 7, n, Smoothing::Step, &mut out);
        let total: f64 = out.iter().sum();
        assert!((total - 84.0).abs() < 1e-3, "{total}");
        // Each day's window holds 6 postings; hour 4 held 0.5, so 5.5 come from every
        // hour alike: the other hours keep (84 − 42 − 5.5·7·…) in proportion.
        let window = 42.0 / 7.0;
        let other = 0.5 * (84.0 - 42.0) / (84.0 - 3.5);
        let slot = other / 6.0;
        for d in 0..7 {
            let day = &out[d * 144..(d + 1) * 144];
            assert!((day[25] - window / 3.0).abs() < 1e-4, "{}", day[25]);
            assert!((day[26] - window * 2.0 / 3.0).abs() < 1e-4, "{}", day[26]);
            assert!(
                day[24].abs() < 1e-9 && day[27].abs() < 1e-9,
                "hour 4 emptied"
            );
            assert!((day[60] - slot).abs() < 1e-5, "{} vs {slot}", day[60]);
        }
        // A feed busy in the window's hour gives the window its postings from that hour
        // alone: 0.4 of 4.3 is 1.72 of the hour's 2.0.
        let mut busy = vec![0.1f32; 24];
        busy[4] = 2.0;
        let p4 = Peak { share: 0.4, ..peak };
        expand_with_peaks(&busy, &[p4], 1, 144, Smoothing::Step, &mut out);
        let sum: f64 = out.iter().sum();
        assert!((sum - 4.3).abs() < 1e-5, "{sum}");
        let kept = 0.28 / 6.0;
        assert!((out[25] - kept - 1.72 / 3.0).abs() < 1e-5, "{}", out[25]);
        assert!(
            (out[26] - kept - 1.72 * 2.0 / 3.0).abs() < 1e-5,
            "{}",
            out[26]
        );
        assert!((out[24] - kept).abs() < 1e-5 && (out[29] - kept).abs() < 1e-5);
        assert!(
            (out[60] - 0.1 / 6.0).abs() < 1e-7,
            "other hours untouched: {}",
            out[60]
        );
        // A window past midnight wraps to the period's start.
        let late = Peak {
            start: 0.99,
            width: 0.02,
            share: 1.0,
        };
        expand_with_peaks(&[1.0f32; 24], &[late], 1, 100, Smoothing::Step, &mut out);
        assert!((out[99] - 12.0).abs() < 1e-3 && (out[0] - 12.0).abs() < 1e-3);
        // (The f32 window reaches a millionth of a slot further.)
        assert!(out[1..99].iter().all(|&v| v.abs() < 1e-4));
        // Out of range: the plain expansion.
        let mut plain = Vec::new();
        expand(&bins, 100, Smoothing::Linear, &mut plain);
        for bad in [
            Peak {
                start: 1.0,
                width: 0.1,
                share: 0.5,
            },
            Peak {
                start: 0.5,
                width: 0.0,
                share: 0.5,
            },
            Peak {
                start: 0.5,
                width: 0.1,
                share: f32::NAN,
            },
        ] {
            expand_with_peaks(&bins, &[bad], 7, 100, Smoothing::Linear, &mut out);
            assert_eq!(out, plain);
        }
    }

    #[test]
    fn two_peaks_each_take_their_share_and_too_much_is_ignored() {
        // A day of 24 postings, 1 an hour; 30% at 06:00-06:10, 40% at 18:00-18:20.
        let bins = vec![1.0f32; 24];
        let window = |h: f64, min: f64, share| Peak {
            start: (h / 24.0) as f32,
            width: (min / 1440.0) as f32,
            share,
        };
        let (am, pm) = (window(6.0, 10.0, 0.3), window(18.0, 20.0, 0.4));
        let mut out = Vec::new();
        expand_with_peaks(&bins, &[am, pm], 1, 144, Smoothing::Step, &mut out);
        let total: f64 = out.iter().sum();
        assert!((total - 24.0).abs() < 1e-3, "{total}");
        // 7.2 postings in slot 36 (06:00-06:10), 9.6 over slots 108 and 109; hours 6 and 18
        // held 1 each, so the other 14.8 come from every hour alike: 22 hours keep
        // (22 - 14.8) / 22 of theirs.
        let kept = (22.0 - (7.2 - 1.0) - (9.6 - 1.0)) / 22.0 / 6.0;
        assert!((out[36] - 7.2).abs() < 1e-4, "{}", out[36]);
        assert!((out[108] - 4.8).abs() < 1e-4 && (out[109] - 4.8).abs() < 1e-4);
        // (The f32 windows reach a millionth of a slot further.)
        assert!(
            out[37].abs() < 1e-4 && out[110].abs() < 1e-4,
            "hours 6 and 18 emptied"
        );
        assert!((out[60] - kept).abs() < 1e-5, "{} vs {kept}", out[60]);
        // Shares past one, or one bad window among good ones: the plain expansion.
        let mut plain = Vec::new();
        expand(&bins, 144, Smoothing::Step, &mut plain);
        let bad = Peak {
            share: f32::NAN,
            ..am
        };
        for peaks in [vec![am, pm, window(12.0, 5.0, 0.4)], vec![am, bad]] {
            expand_with_peaks(&bins, &peaks, 1, 144, Smoothing::Step, &mut out);
            assert_eq!(out, plain);
        }
    }

    #[test]
    fn expansion_preserves_mass_and_shape() {
        let bins: Vec<f32> = (0..24)
            .map(|i| if (8..17).contains(&i) { 3.0 } else { 0.5 })
            .collect();
        let total: f64 = bins.iter().map(|&b| b as f64).sum();
        for n in [24usize, 288, 1440, 100] {
            for sm in [Smoothing::Step, Smoothing::Linear] {
                let mut out = Vec::new();
                expand(&bins, n, sm, &mut out);
                assert_eq!(out.len(), n);
                let s: f64 = out.iter().sum();
                assert!(
                    (s - total).abs() < 1e-9 * total,
                    "{sm:?} n={n}: {s} vs {total}"
                );
                // Noon is busier than 3 am under both smoothings.
                assert!(out[n / 2] > 2.0 * out[n / 8], "{sm:?} n={n}");
            }
        }
        // Step at the bin resolution is the identity.
        let mut out = Vec::new();
        expand(&bins, 24, Smoothing::Step, &mut out);
        assert!(out
            .iter()
            .zip(&bins)
            .all(|(a, &b)| (a - b as f64).abs() < 1e-12));
    }
}
