//! Exhaustive reference solver for small grids: every `m`-subset of the `N` boundaries.
//!
//! Exponential; it exists so tests and benchmarks can check the exact solver and the
//! papers' searches against the true optimum.

use super::cost::CostTable;
use super::exact::SlotSchedule;

/// The optimal `m`-fetch schedule by enumerating all `C(N, m)` subsets.
pub fn solve_brute(table: &CostTable, m: usize) -> SlotSchedule {
    let n = table.n();
    assert!(
        m >= 1 && m <= n && n <= 64,
        "brute force is for small grids only"
    );
    let mut idx: Vec<u32> = (0..m as u32).collect();
    let mut best = SlotSchedule {
        slots: idx.clone(),
        cost: f64::INFINITY,
    };
    loop {
        let cost = table.schedule_cost(&idx);
        if cost < best.cost {
            best = SlotSchedule {
                slots: idx.clone(),
                cost,
            };
        }
        // Advance to the next combination in lexicographic order.
        let mut i = m;
        while i > 0 && idx[i - 1] as usize == n - m + i - 1 {
            i -= 1;
        }
        if i == 0 {
            return best;
        }
        idx[i - 1] += 1;
        for k in i..m {
            idx[k] = idx[k - 1] + 1;
        }
    }
}
