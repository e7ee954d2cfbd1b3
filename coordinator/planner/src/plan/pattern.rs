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
            // Density at bin centre i is bins[i]; evaluate at slot centres and rescale.
            let scale = nb as f64 / n as f64;
            let mut sum = 0.0;
            for j in 0..n {
                // Position in bin-centre units. It lies in (−0.5, nb − 0.5), so its floor is
                // −1 … nb − 1: truncation corrected by one below zero gives it without a call
                // to libm's `floor` (the default x86-64 target has no rounding instruction),
                // and the neighbouring bins wrap by comparison, not by a remainder.
                let x = (j as f64 + 0.5) * scale - 0.5;
                let t = x as i64;
                let i0 = if (t as f64) > x { t - 1 } else { t };
                let frac = x - i0 as f64;
                let i0 = if i0 < 0 {
                    nb - 1
                } else {
                    (i0 as usize).min(nb - 1)
                };
                let i1 = if i0 + 1 == nb { 0 } else { i0 + 1 };
                let v = (bins[i0] as f64 * (1.0 - frac) + bins[i1] as f64 * frac).max(0.0);
                out.push(v);
                sum += v;
            }
            if sum > 0.0 {
                let k = total / sum;
                out.iter_mut().for_each(|v| *v *= k);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
