//! Printing results: aligned tables for people, JSON for scripts.

use serde_json::Value;

/// How results are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned columns with a header line.
    Table,
    /// One JSON document per command on stdout.
    Json,
}

/// Rows of text under `headers`, each column as wide as its widest cell.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let last = cells.len().saturating_sub(1);
        let mut s = String::new();
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            s.push_str(c);
            if i < last {
                s.extend(std::iter::repeat_n(' ', w - c.chars().count() + 2));
            }
        }
        s.truncate(s.trim_end().len());
        s.push('\n');
        s
    };
    let mut out = line(headers.to_vec());
    for r in rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
    }
    out
}

/// Key/value lines, keys aligned.
pub fn pairs(rows: &[(&str, String)]) -> String {
    let w = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    rows.iter()
        .map(|(k, v)| format!("{k:<w$}  {v}\n"))
        .collect()
}

/// Prints `json` or `human`, whichever `format` asks for.
pub fn print(format: Format, json: Value, human: impl FnOnce() -> String) {
    match format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&json).unwrap_or_else(|_| json.to_string())
        ),
        Format::Table => print!("{}", human()),
    }
}

/// A number of fetches or postings per day, as people read it.
pub fn per_day(x: f64) -> String {
    if x == 0.0 {
        "0".into()
    } else if x < 1.0 {
        format!("{x:.3}")
    } else if x < 100.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.0}")
    }
}

/// Seconds as "1h 05m", "12m 30s", "45s".
pub fn duration(secs: f64) -> String {
    if !secs.is_finite() || secs < 0.0 {
        return "-".into();
    }
    let s = secs.round() as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m {:02}s", s / 60, s % 60),
        3600..=86_399 => format!("{}h {:02}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d {:02}h", s / 86_400, (s % 86_400) / 3600),
    }
}

/// An offset within a plan's period as "[day N ]HH:MM:SS".
pub fn offset(secs: f64, period: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    let (day, rest) = (s / 86_400, s % 86_400);
    let hms = format!(
        "{:02}:{:02}:{:02}",
        rest / 3600,
        (rest % 3600) / 60,
        rest % 60
    );
    if period > 86_400.0 {
        format!("day {day} {hms}")
    } else {
        hms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up_and_lines_have_no_trailing_space() {
        let t = table(
            &["ID", "URL"],
            &[
                vec!["a".into(), "http://x/".into()],
                vec!["longer-id".into(), "h".into()],
            ],
        );
        assert_eq!(
            t, "ID         URL\na          http://x/\nlonger-id  h\n",
            "{t}"
        );
    }

    #[test]
    fn durations_and_offsets_read_naturally() {
        assert_eq!(duration(45.0), "45s");
        assert_eq!(duration(750.0), "12m 30s");
        assert_eq!(duration(3_900.0), "1h 05m");
        assert_eq!(duration(2.0 * 86_400.0 + 7_200.0), "2d 02h");
        assert_eq!(duration(f64::NAN), "-");
        assert_eq!(offset(3_723.0, 86_400.0), "01:02:03");
        assert_eq!(offset(86_400.0 + 60.0, 7.0 * 86_400.0), "day 1 00:01:00");
        assert_eq!(per_day(0.25), "0.250");
        assert_eq!(per_day(4.0), "4.00");
        assert_eq!(per_day(1234.4), "1234");
    }
}
