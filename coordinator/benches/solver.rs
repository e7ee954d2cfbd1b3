//! Criterion micro-benchmarks of one exact solve: N = 288 and 1440, m = 1…48, on a
//! two-peak diurnal posting pattern (office hours plus evening).
//!
//! Run: `cargo bench -p kairos-coordinator --bench solver`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use kairos_coordinator::plan::cost::{CostTable, Metric};
use kairos_coordinator::plan::exact::ExactSolver;
use kairos_coordinator::plan::pattern::{expand, Smoothing};
use std::time::Duration;

fn bins() -> Vec<f32> {
    (0..24)
        .map(|h| {
            let h = h as f32;
            0.05 + (-((h - 13.0) / 3.0).powi(2) / 2.0).exp()
                + 0.6 * (-((h - 20.0) / 1.5).powi(2) / 2.0).exp()
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    for metric in [Metric::Delay, Metric::AccessDelay] {
        let mut group = c.benchmark_group(format!("exact_solve_{}", metric.name()));
        group
            .sample_size(20)
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_millis(800));
        for n in [288usize, 1440] {
            let (mut p, mut q) = (Vec::new(), Vec::new());
            expand(&bins(), n, Smoothing::Linear, &mut p);
            expand(
                &bins().iter().rev().copied().collect::<Vec<_>>(),
                n,
                Smoothing::Linear,
                &mut q,
            );
            let table = CostTable::new(metric, &p, &q, 86_400.0 / n as f64);
            let mut solver = ExactSolver::new();
            for m in [1usize, 2, 4, 8, 16, 32, 48] {
                group.bench_with_input(BenchmarkId::new(format!("N{n}"), m), &m, |b, &m| {
                    b.iter(|| std::hint::black_box(solver.solve(&table, m)))
                });
            }
        }
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
