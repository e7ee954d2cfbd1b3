//! Tests of [`super`]: WebSub push on the leader.

use super::*;
use crate::plan::alloc::ceil_level;
use crate::plan::planner::FeedModel;
use crate::registry::FeedRecord;

fn feed(id: &str) -> FeedRecord {
    FeedRecord {
        id: id.into(),
        url: format!("https://{id}.example/feed"),
        host: format!("{id}.example"),
        weight: 1.0,
    }
}

fn model(min_level: i32) -> FeedModel {
    FeedModel {
        weight: 1.0,
        post_bins: vec![1.0; 24],
        peaks: Vec::new(),
        access_bins: vec![1.0; 24],
        min_level,
        max_level: 96,
        host: None,
        document: None,
    }
}

#[test]
fn a_pushed_feed_is_planned_for_what_its_hub_misses_with_a_weekly_check() {
    use crate::control::feedstate::FeedState;
    let feeds = [feed("pushed"), feed("silent"), feed("polled"), feed("busy")];
    // Each posts 24 a day; "busy" 2,400 a day with a 20-item document.
    let mut models = vec![model(1), model(1), model(1), model(3)];
    models[3].post_bins = vec![100.0; 24];
    let shares: HashMap<String, f64> = [
        ("pushed".to_string(), 0.01),
        ("silent".to_string(), 0.8),
        ("busy".to_string(), 0.01),
    ]
    .into();
    let states: HashMap<String, Arc<FeedState>> = [(
        "busy".to_string(),
        Arc::new(FeedState {
            doc_capacity: 20,
            ..FeedState::default()
        }),
    )]
    .into();
    let plan = crate::control::relearn::PlannerSettings::default().plan_config(4);
    scale_pushed(
        &feeds,
        &mut models,
        &PushPlanning {
            shares: &shares,
            states: &states,
            plan: &plan,
            days_per_period: 1.0,
        },
    );
    assert!((models[0].post_bins[0] - 0.01).abs() < 1e-6);
    assert_eq!(models[0].min_level, ceil_level(1.0 / 7.0), "a weekly check");
    assert!((models[1].post_bins[0] - 0.8).abs() < 1e-6);
    assert_eq!(models[1].min_level, 1, "a hub that misses keeps the floor");
    assert_eq!(models[2].post_bins[0], 1.0, "no push, no change");
    assert_eq!(models[2].min_level, 1);
    // 24 postings a day missed by the hub overflow 10 items of the document within
    // half a day: at least two polls a day.
    assert!(
        (2..=3).contains(&models[3].min_level),
        "the document floor of what the hub misses: {}",
        models[3].min_level
    );
}
