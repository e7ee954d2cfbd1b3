//! `deploy/`: the base and each overlay build with kustomize; every core object validates
//! strictly against the Kubernetes schemas (`kubernetes-validate --strict`, offline); and
//! `deploy/lint.py` finds nothing that schemas cannot see (HPA bounds, hardening, pinned
//! images, grace periods, disruption budgets, monitors that select nothing, the
//! PrometheusRule drifting from the rules file). Skipped without the tools, except under CI,
//! where their absence is a failure.

use std::path::{Path, PathBuf};
use std::process::Command;

fn have(tool: &str) -> bool {
    Command::new(tool).arg("--help").output().is_ok()
}

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

fn tools_or_skip() -> bool {
    if have("kubectl") && have("kubernetes-validate") && have("python3") {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "kubectl, kubernetes-validate and python3 are needed (.ci/run installs kubernetes-validate)"
    );
    eprintln!("skipped: kubectl, kubernetes-validate or python3 is not installed");
    false
}

fn render(overlay: &str) -> String {
    let built = Command::new("kubectl")
        .arg("kustomize")
        .arg(deploy().join(overlay))
        .output()
        .expect("run kubectl kustomize");
    assert!(
        built.status.success(),
        "kubectl kustomize {overlay} failed: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    String::from_utf8(built.stdout).unwrap()
}

/// Runs deploy/lint.py on `text`; returns (passed, report).
fn lint(text: &str, tag: &str) -> (bool, String) {
    let dir = std::env::temp_dir().join(format!("kairos-lint-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("rendered.yaml");
    std::fs::write(&file, text).unwrap();
    let out = Command::new("python3")
        .arg(deploy().join("lint.py"))
        .arg(&file)
        .arg(deploy().join("base/prometheus/kairos-rules.yaml"))
        .output()
        .expect("run deploy/lint.py");
    let _ = std::fs::remove_dir_all(&dir);
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), report)
}

/// Validates the core objects of `text` strictly; returns how many passed. Prometheus
/// Operator objects are left to the lint (kubernetes-validate has no schemas for CRDs).
fn validate_core(text: &str, tag: &str) -> usize {
    let core: Vec<&str> = text
        .split("\n---\n")
        .filter(|doc| !doc.contains("apiVersion: monitoring.coreos.com/"))
        .collect();
    let dir = std::env::temp_dir().join(format!("kairos-manifests-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("kairos.yaml");
    std::fs::write(&file, core.join("\n---\n")).unwrap();
    let checked = Command::new("kubernetes-validate")
        .arg("--strict")
        .arg(&file)
        .output()
        .expect("run kubernetes-validate");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert!(checked.status.success(), "{tag}: {report}");
    let passed = report.matches(" passed ").count();
    assert_eq!(passed, core.len(), "{tag}: {report}");
    passed
}

fn kinds(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("kind: "))
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_overlay_builds_validates_and_passes_the_lint() {
    if !tools_or_skip() {
        return;
    }
    for (overlay, core_objects) in [("base", 11), ("overlays/dev", 11), ("overlays/prod", 16)] {
        let text = render(overlay);
        assert_eq!(
            validate_core(&text, &overlay.replace('/', "-")),
            core_objects,
            "{overlay}"
        );
        let (ok, report) = lint(&text, &overlay.replace('/', "-"));
        assert!(ok, "{overlay}: {report}");
        // Every role needs credentials: the coordinator reads a token file, workers a token.
        assert!(
            text.contains("--tokens=/etc/kairos/tokens/tokens"),
            "{overlay}"
        );
        assert!(
            text.contains("--token-file=/etc/kairos/worker/token"),
            "{overlay}"
        );
        assert!(!text.contains("--insecure-loopback"), "{overlay}");
        for k in [
            "StatefulSet",
            "Deployment",
            "Service",
            "ConfigMap",
            "NetworkPolicy",
            "PodDisruptionBudget",
        ] {
            assert!(kinds(&text).iter().any(|x| x == k), "{overlay}: no {k}");
        }
    }
    // dev: one coordinator on its volume, no etcd.
    let dev = render("overlays/dev");
    assert!(!dev.contains("--store=etcd") && dev.contains("--data-dir=/data"));
    // prod: etcd, two coordinators on it without a volume, the autoscaler, the operator's
    // objects, and workers that know both replicas.
    let prod = render("overlays/prod");
    let k = kinds(&prod);
    for want in [
        "HorizontalPodAutoscaler",
        "ServiceMonitor",
        "PodMonitor",
        "PrometheusRule",
    ] {
        assert!(k.iter().any(|x| x == want), "prod: no {want}");
    }
    assert_eq!(
        k.iter().filter(|x| *x == "StatefulSet").count(),
        2,
        "etcd and coordinators"
    );
    assert!(prod.contains("--store=etcd") && !prod.contains("--data-dir=/data"));
    assert!(prod.contains("replicas: 2") && prod.contains("replicas: 3"));
    assert!(prod.contains(
        "kairos-coordinator-0.kairos-coordinator-peers:7700,http://kairos-coordinator-1"
    ));
}

#[test]
fn the_lint_catches_values_that_make_no_sense() {
    if !tools_or_skip() {
        return;
    }
    let prod = render("overlays/prod");
    for (from, to, expect) in [
        (
            "minReplicas: 3",
            "minReplicas: 40",
            "minReplicas 40 and maxReplicas 30",
        ),
        (
            "stabilizationWindowSeconds: 1800",
            "stabilizationWindowSeconds: 0",
            "scale-down stabilization",
        ),
        ("kairos:0.1.0", "kairos:latest", "is not pinned"),
        (
            "allowPrivilegeEscalation: false",
            "allowPrivilegeEscalation: true",
            "privilege escalation",
        ),
        ("minAvailable: 2", "minAvailable: 3", "blocks every drain"),
        (
            "alert: KairosNoWorkers",
            "alert: KairosNoWorker",
            "differ from the rules file",
        ),
        (
            "  - interval: 30s\n    port: metrics\n",
            "  - interval: 30s\n    port: metrix\n",
            "no Service with labels",
        ),
    ] {
        assert!(prod.contains(from), "{from} not in the prod render");
        // The last occurrence: the rules also appear in the ConfigMap, before the
        // PrometheusRule.
        let at = prod.rfind(from).unwrap();
        let broken = format!("{}{to}{}", &prod[..at], &prod[at + from.len()..]);
        let (ok, report) = lint(&broken, "broken");
        assert!(!ok && report.contains(expect), "{to}: {report}");
    }
}
