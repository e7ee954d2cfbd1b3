//! What both soaks are told on the command line beyond their own faults: the farm's shape,
//! the workers, how long to run and what to spend. Each soak flattens [`Shape`] into its own
//! arguments, with the simulated days and the faults it runs.

/// The farm, the workers and the run, alike in both soaks.
#[derive(clap::Args, Clone, Debug)]
pub struct Shape {
    /// Feeds the farm serves.
    #[arg(long, default_value_t = 100_000)]
    pub feeds: usize,
    /// Hosts the feeds are spread over, each its own loopback address.
    #[arg(long, default_value_t = 500)]
    pub hosts: usize,
    /// Worker processes (faults need at least two).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(2..))]
    workers: u16,
    /// Wall minutes the soak runs.
    #[arg(long, default_value_t = 30.0)]
    pub minutes: f64,
    /// Postings per feed per simulated day.
    #[arg(long, default_value_t = 1.0)]
    pub posts_per_day: f64,
    /// The coordinator's budget.
    #[arg(long, default_value_t = 1.5)]
    pub fetches_per_feed_per_day: f64,
    /// Fault bursts per host per simulated day at the farm.
    #[arg(long, default_value_t = 0.5)]
    pub bursts: f64,
    /// The farm's seed.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// `cargo bench` passes `--bench` to every bench binary.
    #[arg(long, hide = true)]
    bench: bool,
}

impl Shape {
    /// Worker processes.
    pub fn workers(&self) -> usize {
        usize::from(self.workers)
    }

    /// Simulated seconds per wall second, for `sim_days` simulated days. A run whose quiet
    /// days at the end leave nothing published, or that lasts no time, is refused with a
    /// line on stderr and exit 2, as clap refuses a malformed value.
    pub fn scale(&self, sim_days: f64, quiet_days: f64) -> f64 {
        let refuse = |why: &str| -> ! {
            eprintln!("error: {why}");
            std::process::exit(2)
        };
        if !(quiet_days >= 0.0 && sim_days > quiet_days && sim_days.is_finite()) {
            refuse("--sim-days must be finite and exceed --quiet-days (at least 0)");
        }
        if !(self.minutes > 0.0 && self.minutes.is_finite()) {
            refuse("--minutes must be finite and above 0");
        }
        sim_days * 86_400.0 / (self.minutes * 60.0)
    }
}
