//! Units of time, defined once. Times are Unix milliseconds (`i64`) where they are instants
//! of the live system, and seconds (`f64`) in traces and plans' offsets.

/// A day in milliseconds.
pub const DAY_MS: i64 = 86_400_000;
/// An hour in milliseconds.
pub const HOUR_MS: i64 = 3_600_000;
/// A day in seconds.
pub const DAY_S: f64 = 86_400.0;
/// An hour in seconds.
pub const HOUR_S: f64 = 3_600.0;
