//! `replay --plot`: the figure per simulated day of each policy (live Kairos, its offline
//! plan, uniform polling and the peers' schedulers), drawn as an SVG.

use anyhow::{bail, Context, Result};
use plotters::prelude::*;
use std::path::Path;

/// One line of the figure: a label and a value per day (NaN where there is none).
pub struct Series {
    /// Legend text.
    pub label: String,
    /// Values, one per day from day 0.
    pub values: Vec<f64>,
    /// Drawn thicker (Kairos' own line).
    pub emphasis: bool,
}

/// Draws `series` against the day to `path` (which must end in `.svg`).
pub fn per_day(path: &Path, title: &str, y_label: &str, series: &[Series]) -> Result<()> {
    if path.extension().and_then(|e| e.to_str()) != Some("svg") {
        bail!(
            "--plot writes SVG only: give a file name ending in .svg, not {}",
            path.display()
        );
    }
    let days = series.iter().map(|s| s.values.len()).max().unwrap_or(0);
    // The axis fits the emphasized line with room to spare; a peer's cold start can be
    // ten times higher and would flatten everything else, so lines are clipped at the top.
    let highest = |emphasis_only: bool| {
        series
            .iter()
            .filter(|s| s.emphasis || !emphasis_only)
            .flat_map(|s| s.values.iter().copied())
            .filter(|v| v.is_finite())
            .fold(0.0f64, f64::max)
    };
    let top = match highest(true) {
        t if t > 0.0 => (2.0 * t).min(highest(false)),
        _ => highest(false),
    };
    if days == 0 || top <= 0.0 {
        bail!("nothing to plot: no day has a figure");
    }
    let root = SVGBackend::new(path, (1200, 720)).into_drawing_area();
    let draw = || -> std::result::Result<(), Box<dyn std::error::Error>> {
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 22))
            .margin(16)
            .x_label_area_size(40)
            .y_label_area_size(64)
            .build_cartesian_2d(0f64..(days.max(2) - 1) as f64, 0f64..top * 1.05)?;
        chart
            .configure_mesh()
            .x_desc("day")
            .y_desc(y_label)
            .light_line_style(WHITE.mix(0.0))
            .draw()?;
        for (i, s) in series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let width = if s.emphasis { 3 } else { 1 };
            let points: Vec<(f64, f64)> = s
                .values
                .iter()
                .enumerate()
                .filter(|(_, v)| v.is_finite())
                .map(|(d, &v)| (d as f64, v.min(top * 1.05)))
                .collect();
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(width)))?
                .label(s.label.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(width))
                });
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw()?;
        root.present()?;
        Ok(())
    };
    draw()
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| format!("drawing {}", path.display()))
}
