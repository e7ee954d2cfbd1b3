//! Tests of [`super`]: one subscription's life, its back-off, leases, redirects and hubs
//! named after the first.

use super::*;

const H: i64 = 3_600_000;

fn wanted(pairs: &[(&str, &str, &str)]) -> HashMap<String, Wanted> {
    pairs
        .iter()
        .map(|(f, h, t)| (f.to_string(), want(&[h], t)))
        .collect()
}

fn want(hubs: &[&str], topic: &str) -> Wanted {
    Wanted {
        hubs: hubs.iter().map(|h| h.to_string()).collect(),
        topic: topic.to_string(),
    }
}

/// Feed "f" naming two hubs, and the hubs in the order it names them.
fn two_hubs() -> (&'static str, &'static str, HashMap<String, Wanted>) {
    let (a, b) = ("https://a-hub/", "https://b-hub/");
    let w = [("f".to_string(), want(&[a, b], "https://f/feed"))].into();
    (a, b, w)
}

/// The hub and callback of the one subscribe request in `acts`, and the hub it moved from.
fn subscribed(acts: &[Action]) -> (String, String, Option<String>) {
    match acts {
        [Action::Subscribe {
            hub,
            callback,
            moved_from,
            ..
        }] => (hub.clone(), callback.clone(), moved_from.clone()),
        other => panic!("one subscribe request expected: {other:?}"),
    }
}

fn draws() -> impl FnMut() -> (String, String) {
    let mut n = 0;
    move || {
        n += 1;
        (format!("cb{n}"), format!("secret{n}"))
    }
}

#[test]
fn subscribe_verify_renew_and_leave() {
    let p = PushPolicy::default();
    let mut fresh = draws();
    let mut subs = Subscriptions::default();
    let w = wanted(&[("a", "https://hub/", "https://a/feed")]);
    let acts = subs.reconcile(&w, 0, &p, &mut fresh);
    assert_eq!(
        acts,
        vec![Action::Subscribe {
            feed: "a".into(),
            hub: "https://hub/".into(),
            topic: "https://a/feed".into(),
            callback: "cb1".into(),
            secret: "secret1".into(),
            lease_seconds: p.lease_seconds,
            moved_from: None,
        }]
    );
    // Nothing more is due while the verification is awaited.
    assert!(subs.reconcile(&w, 10 * 60_000, &p, &mut fresh).is_empty());
    assert!(!subs.of_feed("a").unwrap().delivering(60_000));
    // The wrong topic, mode or callback is refused; the right one confirmed.
    assert_eq!(
        subs.verify("cb1", "subscribe", "https://evil/", Some(3600), H / 2, &p),
        Verdict::Refuse("another topic")
    );
    assert_eq!(
        subs.verify("cb9", "subscribe", "https://a/feed", Some(3600), H / 2, &p),
        Verdict::Refuse("unknown callback")
    );
    assert_eq!(
        subs.verify("cb1", "unsubscribe", "https://a/feed", None, H / 2, &p),
        Verdict::Refuse("no unsubscription pending")
    );
    assert_eq!(
        subs.verify(
            "cb1",
            "subscribe",
            "https://a/feed",
            Some(5 * 86_400),
            H / 2,
            &p
        ),
        Verdict::Confirm
    );
    let s = subs.of_feed("a").unwrap();
    assert!(s.delivering(H));
    assert_eq!(s.state(H), "active");
    // Renewed a day before the 5-day lease ends, delivering meanwhile.
    let lease_end = H / 2 + 5 * 86_400_000;
    assert!(subs
        .reconcile(&w, lease_end - 25 * H, &p, &mut fresh)
        .is_empty());
    let renew = subs.reconcile(&w, lease_end - 23 * H, &p, &mut fresh);
    assert!(matches!(&renew[..], [Action::Subscribe { callback, .. }] if callback == "cb1"));
    assert_eq!(
        subs.of_feed("a").unwrap().state(lease_end - 22 * H),
        "renewing"
    );
    // The feed no longer names the hub: unsubscribed, and that verification confirmed.
    let gone = subs.reconcile(&HashMap::new(), lease_end - 20 * H, &p, &mut fresh);
    assert!(matches!(&gone[..], [Action::Unsubscribe { callback, .. }] if callback == "cb1"));
    assert!(subs.of_feed("a").is_none());
    assert_eq!(
        subs.verify(
            "cb1",
            "unsubscribe",
            "https://a/feed",
            None,
            lease_end - 20 * H,
            &p
        ),
        Verdict::Confirm
    );
    assert_eq!(
        subs.verify(
            "cb1",
            "unsubscribe",
            "https://a/feed",
            None,
            lease_end - 20 * H,
            &p
        ),
        Verdict::Refuse("no unsubscription pending"),
        "confirmed once"
    );
}

#[test]
fn failures_back_off_denials_rest_and_silence_times_out() {
    let p = PushPolicy::default();
    let mut fresh = draws();
    let mut subs = Subscriptions::default();
    let w = wanted(&[("a", "https://hub/", "https://a/feed")]);
    subs.reconcile(&w, 0, &p, &mut fresh);
    // Refused three times: 5, 10, 20 minutes between tries.
    let mut t = 0;
    for (i, wait) in [5, 10, 20].iter().enumerate() {
        subs.request_answered("a", Err("HTTP 500".into()), t, &p);
        assert!(
            subs.reconcile(&w, t + wait * 60_000 - 1, &p, &mut fresh)
                .is_empty(),
            "try {i}"
        );
        t += wait * 60_000;
        assert_eq!(subs.reconcile(&w, t, &p, &mut fresh).len(), 1, "try {i}");
    }
    // Many failures wait a day at most.
    for _ in 0..30 {
        subs.request_answered("a", Err("HTTP 500".into()), t, &p);
    }
    match &subs.of_feed("a").unwrap().phase {
        Phase::Failed { retry_at_ms, .. } => assert_eq!(*retry_at_ms - t, p.retry_max_ms),
        other => panic!("{other:?}"),
    }
    // A denial rests a day; a denial for another topic or callback is ignored.
    let mut subs = Subscriptions::default();
    subs.reconcile(&w, 0, &p, &mut fresh);
    let cb = subs.of_feed("a").unwrap().callback.clone();
    assert!(!subs.denied(&cb, "https://other/", "no", 1, &p));
    assert!(!subs.denied("nope", "https://a/feed", "no", 1, &p));
    assert!(subs.denied(&cb, "https://a/feed", "topic not allowed", 1, &p));
    assert_eq!(subs.of_feed("a").unwrap().state(2), "denied");
    assert!(subs.reconcile(&w, 24 * H, &p, &mut fresh).is_empty());
    assert_eq!(subs.reconcile(&w, 24 * H + 1, &p, &mut fresh).len(), 1);
    // A hub that never verifies: the request fails after the timeout, is tried again.
    let mut subs = Subscriptions::default();
    subs.reconcile(&w, 0, &p, &mut fresh);
    assert!(subs.reconcile(&w, H, &p, &mut fresh).is_empty());
    assert_eq!(subs.of_feed("a").unwrap().state(H), "failed");
    assert_eq!(subs.reconcile(&w, H + 5 * 60_000, &p, &mut fresh).len(), 1);
}

#[test]
fn a_short_lease_is_renewed_at_its_half_and_a_failed_renewal_still_delivers() {
    let p = PushPolicy::default();
    let mut fresh = draws();
    let mut subs = Subscriptions::default();
    let w = wanted(&[("a", "https://hub/", "https://a/feed")]);
    subs.reconcile(&w, 0, &p, &mut fresh);
    // The hub grants an hour, not the ten days asked.
    assert_eq!(
        subs.verify("cb1", "subscribe", "https://a/feed", Some(3600), 0, &p),
        Verdict::Confirm
    );
    assert!(subs.reconcile(&w, H / 2 - 1, &p, &mut fresh).is_empty());
    assert_eq!(subs.reconcile(&w, H / 2, &p, &mut fresh).len(), 1);
    subs.request_answered("a", Err("HTTP 503".into()), H / 2, &p);
    let s = subs.of_feed("a").unwrap();
    assert_eq!(s.state(H / 2 + 1), "failed");
    assert!(s.delivering(H - 1), "the lease granted still runs");
    assert!(!s.delivering(H));
}

#[test]
fn a_redirected_request_and_a_moved_hub() {
    let p = PushPolicy::default();
    let mut fresh = draws();
    let mut subs = Subscriptions::default();
    let w = wanted(&[("a", "https://hub/", "https://a/feed")]);
    subs.reconcile(&w, 0, &p, &mut fresh);
    subs.request_answered("a", Ok(Some("https://hub2/".into())), 1, &p);
    assert_eq!(subs.of_feed("a").unwrap().hub, "https://hub2/");
    assert_eq!(
        subs.verify("cb1", "subscribe", "https://a/feed", Some(3600), 2, &p),
        Verdict::Confirm
    );
    // The document now names another hub: unsubscribed at the old, subscribed anew.
    let w2 = wanted(&[("a", "https://hub3/", "https://a/feed")]);
    let acts = subs.reconcile(&w2, 3, &p, &mut fresh);
    assert!(
        matches!(&acts[0], Action::Unsubscribe { hub, callback, .. } if hub == "https://hub2/" && callback == "cb1")
    );
    assert!(
        matches!(&acts[1], Action::Subscribe { hub, callback, .. } if hub == "https://hub3/" && callback == "cb2")
    );
    assert!(subs.of_callback("cb1").is_none());
    assert_eq!(subs.of_callback("cb2").unwrap().feed, "a");
    // A restart reads them back.
    let again = Subscriptions::from_stored(subs.all().cloned());
    assert_eq!(again.of_callback("cb2"), subs.of_callback("cb2"));
}

#[test]
fn a_redirected_subscription_stays_while_its_document_names_the_same_hub() {
    let p = PushPolicy::default();
    let mut fresh = draws();
    let mut subs = Subscriptions::default();
    let w = wanted(&[("a", "https://hub/", "https://a/feed")]);
    subs.reconcile(&w, 0, &p, &mut fresh);
    subs.request_answered("a", Ok(Some("https://hub2/".into())), 1, &p);
    assert_eq!(
        subs.verify("cb1", "subscribe", "https://a/feed", Some(3600), 2, &p),
        Verdict::Confirm
    );
    // The document still names the hub that redirected: nothing to do, no churn.
    for t in [3, 60_000, 10 * 60_000] {
        assert!(subs.reconcile(&w, t, &p, &mut fresh).is_empty(), "at {t}");
    }
    let s = subs.of_feed("a").unwrap();
    assert_eq!(
        (s.hub.as_str(), s.callback.as_str()),
        ("https://hub2/", "cb1")
    );
    assert!(s.delivering(10 * 60_000));
}

#[test]
fn a_denial_moves_the_feed_on_to_the_next_hub_it_names_and_a_full_round_rests() {
    let p = PushPolicy::default();
    let mut fresh = draws();
    let mut subs = Subscriptions::default();
    let (a, b, w) = two_hubs();
    assert_eq!(
        subscribed(&subs.reconcile(&w, 0, &p, &mut fresh)),
        (a.into(), "cb1".into(), None)
    );
    assert!(subs.denied("cb1", "https://f/feed", "not here", 10, &p));
    // The next hub at once, with its own callback; the first's callback is no longer ours.
    assert_eq!(
        subscribed(&subs.reconcile(&w, 20, &p, &mut fresh)),
        (b.into(), "cb2".into(), Some(a.into()))
    );
    assert_eq!(
        subs.verify("cb1", "subscribe", "https://f/feed", None, 30, &p),
        Verdict::Refuse("unknown callback")
    );
    assert_eq!(subs.of_feed("f").unwrap().moved_on, 1);
    // Both denied: the second's day of rest runs out before the round starts again.
    assert!(subs.denied("cb2", "https://f/feed", "nor here", 40, &p));
    assert!(subs.reconcile(&w, 50, &p, &mut fresh).is_empty());
    assert!(subs
        .reconcile(&w, 40 + 24 * H - 1, &p, &mut fresh)
        .is_empty());
    assert_eq!(
        subscribed(&subs.reconcile(&w, 40 + 24 * H, &p, &mut fresh)),
        (a.into(), "cb3".into(), Some(b.into()))
    );
    assert_eq!(subs.of_feed("f").unwrap().moved_on, 0);
    // Verified at last: it stays there, and a later denial starts from it.
    assert_eq!(
        subs.verify(
            "cb3",
            "subscribe",
            "https://f/feed",
            Some(86_400),
            25 * H,
            &p
        ),
        Verdict::Confirm
    );
    assert!(subs.reconcile(&w, 26 * H, &p, &mut fresh).is_empty());
    assert_eq!(subs.of_feed("f").unwrap().hub, a);
}

#[test]
fn a_hub_named_twice_is_one_hub_to_move_on_from() {
    let p = PushPolicy::default();
    let mut fresh = draws();
    let mut subs = Subscriptions::default();
    let (a, b) = ("https://a-hub/", "https://b-hub/");
    let twice = Wanted::new(
        [a, a, b].iter().map(|h| h.to_string()).collect(),
        "https://f/feed".into(),
    );
    assert_eq!(twice.hubs, vec![a.to_string(), b.to_string()]);
    let w: HashMap<String, Wanted> = [("f".to_string(), twice)].into();
    subs.reconcile(&w, 0, &p, &mut fresh);
    assert!(subs.denied("cb1", "https://f/feed", "not here", 10, &p));
    // Denied at `a`: on to `b`, not from `a` to `a` again.
    assert_eq!(
        subscribed(&subs.reconcile(&w, 20, &p, &mut fresh)),
        (b.into(), "cb2".into(), Some(a.into()))
    );
}

#[test]
fn a_hub_that_keeps_failing_is_left_for_the_next_after_three_tries() {
    let p = PushPolicy::default();
    let mut fresh = draws();
    let mut subs = Subscriptions::default();
    let (a, b, w) = two_hubs();
    subs.reconcile(&w, 0, &p, &mut fresh);
    // Two failures: asked again at the same hub after each back-off.
    let mut t = 0;
    for wait in [5, 10] {
        subs.request_answered("f", Err("HTTP 503".into()), t, &p);
        t += wait * 60_000;
        assert_eq!(subscribed(&subs.reconcile(&w, t, &p, &mut fresh)).0, a);
    }
    // The third: the next hub at once, not after the back-off.
    subs.request_answered("f", Err("HTTP 503".into()), t, &p);
    let (hub, callback, from) = subscribed(&subs.reconcile(&w, t + 1, &p, &mut fresh));
    assert_eq!((hub.as_str(), from.as_deref()), (b, Some(a)));
    assert_eq!(subs.of_callback(&callback).unwrap().failures, 0);
    // A hub that never verifies counts as failing too (an hour each), read every minute.
    let mut subs = Subscriptions::default();
    subs.reconcile(&w, 0, &p, &mut fresh);
    let moved = (1..6 * 60).map(|m| m * 60_000).find_map(|t| {
        match &subs.reconcile(&w, t, &p, &mut fresh)[..] {
            [Action::Subscribe {
                hub,
                moved_from: Some(_),
                ..
            }] => Some((hub.clone(), t)),
            _ => None,
        }
    });
    let (hub, at) = moved.expect("moved on within six hours");
    assert_eq!(hub, b);
    assert!(
        at > 3 * H && at < 4 * H,
        "after three hours unverified: {at}"
    );
}

#[test]
fn a_failed_renewal_still_delivering_stays_and_one_hub_never_moves() {
    let p = PushPolicy::default();
    let mut fresh = draws();
    let mut subs = Subscriptions::default();
    let (a, b, w) = two_hubs();
    subs.reconcile(&w, 0, &p, &mut fresh);
    subs.verify("cb1", "subscribe", "https://f/feed", Some(4 * 3600), 0, &p);
    // Renewal at the lease's half; it fails three times while the lease runs.
    let mut t = 2 * H;
    assert_eq!(subscribed(&subs.reconcile(&w, t, &p, &mut fresh)).0, a);
    for _ in 0..3 {
        subs.request_answered("f", Err("HTTP 503".into()), t, &p);
        t += 20 * 60_000;
        subs.reconcile(&w, t, &p, &mut fresh);
    }
    assert!(t < 4 * H);
    assert_eq!(subs.of_feed("f").unwrap().hub, a, "delivering: stays");
    // Once the lease is over it moves on.
    subs.request_answered("f", Err("HTTP 503".into()), 4 * H, &p);
    let acts = subs.reconcile(&w, 4 * H + 1, &p, &mut fresh);
    assert_eq!(subscribed(&acts).0, b);
    // A feed naming one hub rests and retries there, however often it fails.
    let one = wanted(&[("g", a, "https://g/feed")]);
    let mut subs = Subscriptions::default();
    subs.reconcile(&one, 0, &p, &mut fresh);
    for i in 0..6 {
        subs.request_answered("g", Err("HTTP 500".into()), i * 24 * H, &p);
        let acts = subs.reconcile(&one, (i + 1) * 24 * H, &p, &mut fresh);
        assert_eq!(
            subscribed(&acts),
            (a.into(), subs.of_feed("g").unwrap().callback.clone(), None)
        );
    }
}

#[test]
fn subscriptions_stored_before_hubs_were_tried_in_turn_read_back() {
    let stored = r#"{"feed":"f","hub":"https://hub/","topic":"https://f/feed","callback":"cb","secret":"s","phase":{"Active":{"until_ms":10,"lease_ms":5}},"failures":0}"#;
    let s: Subscription = serde_json::from_str(stored).unwrap();
    assert_eq!((s.named_hub(), s.moved_on), ("https://hub/", 0));
    // A redirected one keeps the hub it was asked of through a store and back.
    let mut r = s.clone();
    r.named = Some("https://asked/".into());
    let back: Subscription = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    assert_eq!(back.named_hub(), "https://asked/");
}
