//! `kairosctl` against a real `serve` with tokens: every command family in table and JSON
//! form, OPML import and export (and the export imported back changes nothing), and the
//! exit codes scripts rely on — 1 refused, 2 unreachable or unusable input, 3 not found.

use kairos_tests::{bin, start_coordinator, TempDir};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const OPS: &str = "ops-token-0123456789abcdefghij";
const DASH: &str = "dash-token-0123456789abcdefghij";

struct Ctl<'a> {
    url: &'a str,
    token: &'a Path,
}

impl Ctl<'_> {
    fn run(&self, args: &[&str]) -> Output {
        let mut all = vec!["--coordinator", self.url, "--token-file"];
        all.push(self.token.to_str().unwrap());
        all.extend_from_slice(args);
        Command::new(bin("kairosctl"))
            .args(&all)
            .output()
            .expect("run kairosctl")
    }

    /// Runs and expects success; returns stdout.
    fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert!(
            o.status.success(),
            "kairosctl {args:?}: {:?}\n{}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut a = vec!["-o", "json"];
        a.extend_from_slice(args);
        let out = self.ok(&a);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}\n{out}"))
    }

    /// Runs and expects exit code `code`; returns stderr.
    fn fails(&self, code: i32, args: &[&str]) -> String {
        let o = self.run(args);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(code), "kairosctl {args:?}: {err}");
        assert!(err.starts_with("kairosctl: "), "{err}");
        assert!(
            !err.contains("panicked") && !err.contains("backtrace"),
            "{err}"
        );
        err
    }
}

fn urls(opml: &str) -> Vec<String> {
    let mut v: Vec<String> = opml
        .split("xmlUrl=\"")
        .skip(1)
        .map(|s| s.split('"').next().unwrap().replace("&amp;", "&"))
        .collect();
    v.sort();
    v
}

#[test]
fn kairosctl_drives_the_admin_api_with_meaningful_exit_codes() {
    let dir = TempDir::new("kairosctl");
    dir.write(
        "tokens",
        &format!("ops admin:read,admin:write {OPS}\ndash admin:read {DASH}\n"),
    );
    dir.write("ops", OPS);
    dir.write("dash", DASH);
    dir.write("empty", "");
    let tokens = dir.path().join("tokens");
    let data = dir.path().join("data");
    let c = start_coordinator(
        &[
            "--tokens",
            tokens.to_str().unwrap(),
            "--data-dir",
            data.to_str().unwrap(),
            "--replan-interval",
            "1s",
        ],
        &dir.path().join("coordinator.log"),
    );
    let url = c.url.clone();
    let ops = Ctl {
        url: &url,
        token: &dir.path().join("ops"),
    };
    let dash = Ctl {
        url: &url,
        token: &dir.path().join("dash"),
    };

    // Feeds.
    // Ids derived from the URL, as OPML import derives them (so re-importing finds them).
    let news = ops.json(&["feeds", "add", "https://news.example/feed.xml"])["feed_id"]
        .as_str()
        .unwrap()
        .to_string();
    let news = news.as_str();
    let added = ops.json(&[
        "feeds",
        "add",
        "https://blog.example/atom?x=1&y=2",
        "--weight",
        "2.5",
    ]);
    let blog = added["feed_id"].as_str().unwrap().to_string();
    assert_eq!(added["weight"], 2.5);
    let table = ops.ok(&["feeds", "list"]);
    let mut lines = table.lines();
    assert!(lines.next().unwrap().starts_with("FEED"), "{table}");
    assert_eq!(lines.count(), 2, "{table}");
    assert!(table.contains(news) && table.contains(&blog), "{table}");
    let list = dash.json(&["feeds", "list"]);
    assert_eq!(list.as_array().unwrap().len(), 2);
    assert_eq!(dash.json(&["feeds", "get", news])["host"], "news.example");
    let err = ops.fails(3, &["feeds", "get", "nope"]);
    assert!(err.contains("feed"), "{err}");
    let err = ops.fails(1, &["feeds", "add", "ftp://files.example/x"]);
    assert!(err.contains("INVALID_ARGUMENT"), "{err}");

    // Scopes and tokens: a read-only token cannot write; no token is refused.
    let err = dash.fails(1, &["feeds", "remove", news]);
    assert!(err.contains("PERMISSION_DENIED"), "{err}");
    let nobody = Ctl {
        url: &url,
        token: &dir.path().join("empty"),
    };
    let err = nobody.fails(2, &["stats"]);
    assert!(err.contains("must hold one token"), "{err}");

    // Users and subscriptions.
    ops.ok(&["users", "add", "ann", "--weight", "2"]);
    ops.ok(&["subs", "add", "ann", news]);
    let subs = dash.json(&["subs", "list", "--user", "ann"]);
    assert_eq!(subs[0]["feed_id"], news);
    assert_eq!(dash.json(&["users", "list"])[0]["weight"], 2.0);
    ops.fails(3, &["subs", "add", "ann", "missing-feed"]);

    // OPML: import with one unusable outline; export; the export imported again adds
    // nothing.
    dir.write(
        "in.opml",
        r#"<?xml version="1.0"?><opml version="2.0"><head/><body>
<outline text="A" xmlUrl="https://a.example/rss"/>
<outline text="B" xmlUrl="https://b.example/feed?q=1&amp;r=2"/>
<outline text="bad" xmlUrl="not a url"/>
<outline text="News again" xmlUrl="https://news.example/feed.xml"/>
</body></opml>"#,
    );
    let r = ops.json(&[
        "opml",
        "import",
        dir.path().join("in.opml").to_str().unwrap(),
        "--user",
        "ann",
    ]);
    assert_eq!(r["feeds_added"], 2, "{r}");
    assert_eq!(r["feeds_already_present"], 1, "{r}");
    assert_eq!(r["skipped"].as_array().unwrap().len(), 1, "{r}");
    let all = dash.ok(&["opml", "export"]);
    assert_eq!(
        urls(&all),
        vec![
            "https://a.example/rss",
            "https://b.example/feed?q=1&r=2",
            "https://blog.example/atom?x=1&y=2",
            "https://news.example/feed.xml",
        ]
    );
    let mine = dash.ok(&["opml", "export", "--user", "ann"]);
    assert_eq!(urls(&mine).len(), 3, "{mine}");
    dir.write("out.opml", &all);
    let again = ops.json(&[
        "opml",
        "import",
        dir.path().join("out.opml").to_str().unwrap(),
    ]);
    assert_eq!(again["feeds_added"], 0, "{again}");
    assert_eq!(again["feeds_already_present"], 4, "{again}");
    ops.fails(2, &["opml", "import", "/nonexistent/feeds.opml"]);

    // Settings.
    let s = dash.json(&["settings", "get"]);
    assert_eq!(s["metric"], "delay", "{s}");
    assert_eq!(s["replan_interval_seconds"], 1, "{s}");
    let s = ops.json(&["settings", "set", "--budget", "500", "--metric", "miss"]);
    assert_eq!(s["budget_fetches_per_day"], 500.0, "{s}");
    assert_eq!(s["metric"], "miss", "{s}");
    assert!(ops.ok(&["settings", "get"]).contains("miss"));
    let err = ops.fails(1, &["settings", "set", "--metric", "bogus"]);
    assert!(err.contains("bogus"), "{err}");
    ops.fails(2, &["settings", "set"]);
    // A budget per feed stays per feed when another setting changes (it was turned into
    // a fixed total by the old Get-then-Update path).
    let s = ops.json(&["settings", "set", "--fetches-per-feed-per-day", "2.5"]);
    assert_eq!(s["budget_fetches_per_feed_per_day"], 2.5, "{s}");
    let s = ops.json(&["settings", "set", "--metric", "delay"]);
    assert_eq!(s["budget_fetches_per_feed_per_day"], 2.5, "{s}");
    assert_eq!(s["metric"], "delay", "{s}");

    // Host limits, stats, workers.
    let h = ops.json(&["hosts", "limit", "news.example", "100"]);
    assert_eq!(h[0]["max_fetches_per_day"], 100.0);
    assert!(dash.ok(&["hosts", "list"]).contains("news.example"));
    let st = dash.json(&["stats"]);
    assert_eq!(st["feeds"], 4, "{st}");
    assert_eq!(st["users"], 1, "{st}");
    assert!(dash.ok(&["stats"]).contains("fetches a day"));
    // No document has been fetched yet: no floor holds any of the budget.
    assert_eq!(st["capacity_floor_fetches_per_day"], 0.0, "{st}");
    // Nor is any posting expected to scroll off one.
    assert_eq!(st["expected_lost_postings_per_day"], 0.0, "{st}");
    assert!(dash.ok(&["stats"]).contains("expected lost"));
    // Nothing fetched yet: no feed can have fallen out of the schedule.
    assert_eq!(st["feeds_overdue"], 0, "{st}");
    assert!(dash.ok(&["stats"]).contains("feeds overdue"));
    // A first start plans before it serves: no stored plan is in force.
    assert_eq!(st["stored_plan_written_unix_ms"], 0, "{st}");
    assert!(dash
        .ok(&["stats"])
        .contains("plan in force        this leader's"));
    assert_eq!(dash.json(&["workers"]), Value::Array(vec![]));
    assert!(dash.ok(&["workers"]).starts_with("NAME"));

    // A feed's plan, once a round has planned it.
    let deadline = Instant::now() + Duration::from_secs(30);
    let plan = loop {
        let o = dash.run(&["-o", "json", "feeds", "plan", news]);
        if o.status.success() {
            break serde_json::from_slice::<Value>(&o.stdout).unwrap();
        }
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains("not planned yet"), "{err}");
        assert!(Instant::now() < deadline, "news was never planned");
        std::thread::sleep(Duration::from_millis(300));
    };
    assert!(plan["fetches_per_day"].as_f64().unwrap() > 0.0, "{plan}");
    assert_eq!(
        plan["fetch_offsets_seconds"].as_array().unwrap().len() as f64,
        (plan["fetches_per_day"].as_f64().unwrap() * plan["period_seconds"].as_f64().unwrap()
            / 86_400.0)
            .round(),
        "{plan}"
    );
    let human = dash.ok(&["feeds", "plan", news]);
    assert!(
        human.contains("fetch times") && human.contains("expected delay"),
        "{human}"
    );
    let plan_from_table = human
        .lines()
        .find_map(|l| l.strip_prefix("fetch times"))
        .unwrap();
    assert_eq!(
        plan_from_table.matches(':').count(),
        2 * plan["fetch_offsets_seconds"].as_array().unwrap().len(),
        "{human}"
    );
    ops.ok(&["feeds", "remove", news]);
    ops.fails(3, &["feeds", "plan", news]);

    // A coordinator that is not there: a clear line, exit 2, promptly.
    let mut c = c;
    c.child.0.kill().unwrap();
    c.child.0.wait().unwrap();
    let t = Instant::now();
    let err = ops.fails(2, &["stats"]);
    assert!(err.contains("cannot reach the coordinator at"), "{err}");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
}
