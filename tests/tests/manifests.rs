//! `deploy/`: the base and each overlay build with kustomize; every core object validates
//! strictly against the Kubernetes schemas (`kubernetes-validate --strict`, offline); and
//! `deploy/lint.py` finds nothing that schemas cannot see (HPA bounds, hardening, pinned
//! images, grace periods, disruption budgets, monitors that select nothing, the
//! PrometheusRule drifting from the rules file). The Prometheus Operator's kinds are checked
//! strictly against the operator's published schemas (`deploy/validate_crds.py`). Skipped
//! without the tools, except under CI, where their absence is a failure.

use std::path::{Path, PathBuf};
use std::process::Command;

fn have(tool: &str) -> bool {
    Command::new(tool).arg("--help").output().is_ok()
}

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

/// Whether python3 has the Prometheus Operator's schemas (PyPI's
/// cloudcoil-models-prometheus-operator, which .ci/run installs pinned).
fn have_operator_schemas() -> bool {
    Command::new("python3")
        .args(["-c", "import cloudcoil.models.prometheus_operator, yaml"])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn tools_or_skip() -> bool {
    if have("kubectl") && have("kubernetes-validate") && have_operator_schemas() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "kubectl, kubernetes-validate and python3 with cloudcoil-models-prometheus-operator \
         are needed (.ci/run installs them)"
    );
    eprintln!("skipped: kubectl, kubernetes-validate or the operator's schemas are not installed");
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

/// Validates the Prometheus Operator objects of `text` strictly against the operator's
/// published schemas (deploy/validate_crds.py); returns (passed objects, report) or panics
/// with the report when `must_pass` and something failed.
fn validate_operator_kinds(text: &str, tag: &str) -> (bool, usize, String) {
    let dir = std::env::temp_dir().join(format!("kairos-crds-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("rendered.yaml");
    std::fs::write(&file, text).unwrap();
    let out = Command::new("python3")
        .arg(deploy().join("validate_crds.py"))
        .arg(&file)
        .output()
        .expect("run deploy/validate_crds.py");
    let _ = std::fs::remove_dir_all(&dir);
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let passed = report.lines().filter(|l| l.ends_with(": passed")).count();
    (out.status.success(), passed, report)
}

/// Validates the core objects of `text` strictly; returns how many passed. Prometheus
/// Operator objects go to [`validate_operator_kinds`] (kubernetes-validate has no schemas
/// for CRDs).
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
    for (overlay, core_objects, operator_objects) in [
        ("base", 12, 0),
        ("overlays/dev", 12, 0),
        ("overlays/prod", 17, 3),
        ("overlays/prod-tls", 17, 3),
    ] {
        let text = render(overlay);
        assert_eq!(
            validate_core(&text, &overlay.replace('/', "-")),
            core_objects,
            "{overlay}"
        );
        let (ok, passed, report) = validate_operator_kinds(&text, &overlay.replace('/', "-"));
        assert!(ok && passed == operator_objects, "{overlay}: {report}");
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
        // WebSub: the callback listener behind an Ingress, its port open in the policy.
        assert!(
            text.contains("--push-listen=0.0.0.0:7704") && text.contains("--push-url=https://"),
            "{overlay}"
        );
        assert!(
            kinds(&text).iter().any(|x| x == "Ingress"),
            "{overlay}: no Ingress"
        );
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

/// prod-tls: TLS on the coordinators' listeners, workers on https with the CA, and the
/// coordinators probed over plain HTTP; the lint refuses the gRPC probes prod uses there.
#[test]
fn the_tls_overlay_serves_tls_and_probes_over_http() {
    if !tools_or_skip() {
        return;
    }
    let tls = render("overlays/prod-tls");
    for want in [
        "--tls-cert=/etc/kairos/tls/tls.crt",
        "--tls-key=/etc/kairos/tls/tls.key",
        "--tls-ca=/etc/kairos/tls/ca.crt",
        "--coordinator=https://kairos-coordinator-0.kairos-coordinator-peers:7700,https://kairos-coordinator-1",
        "secretName: kairos-coordinator-tls",
        "path: /readyz",
        "path: /livez",
    ] {
        assert!(tls.contains(want), "prod-tls: no {want}");
    }
    assert!(
        !tls.contains("--coordinator=http://"),
        "a worker left on plaintext"
    );
    // The same objects with prod's gRPC readiness probe put back: refused.
    // The first /readyz is the coordinators' (etcd's comes later in the render).
    let at = tls.find("path: /readyz").unwrap();
    let start = tls[..at].rfind("readinessProbe:").unwrap();
    let end = at + tls[at..].find("periodSeconds").unwrap();
    let broken = format!(
        "{}readinessProbe:\n          grpc:\n            port: 7700\n          {}",
        &tls[..start],
        &tls[end..]
    );
    let (ok, report) = lint(&broken, "tls-grpc-probe");
    assert!(
        !ok && report.contains("gRPC probe on a TLS listener"),
        "{report}"
    );
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

/// The operator's kinds are held to their published schemas: a wrong type, a malformed
/// duration and a field the schema does not name (which the API server would prune without a
/// word) each fail, and a field that exists but the manifests do not use passes.
#[test]
fn operator_objects_are_held_to_the_published_schemas() {
    if !tools_or_skip() {
        return;
    }
    let prod = render("overlays/prod");
    for (from, to, expect) in [
        (
            "  - interval: 30s\n    port: metrics\n",
            "  - interval: thirty\n    port: metrics\n",
            "interval: String should match pattern",
        ),
        (
            "  - interval: 30s\n    port: metrics\n",
            "  - intervall: 30s\n    port: metrics\n",
            "intervall: not a field of the schema",
        ),
        (
            "  - interval: 30s\n    port: metrics\n",
            "  - interval: 30s\n    port: 9100\n",
            "port: Input should be a valid string",
        ),
        (
            "  - interval: 30s\n    port: metrics\n",
            "  - interval: 30s\n    honorLabels: true\n    port: metrics\n",
            "",
        ),
    ] {
        assert!(prod.contains(from), "{from} not in the prod render");
        let at = prod.rfind(from).unwrap();
        let changed = format!("{}{to}{}", &prod[..at], &prod[at + from.len()..]);
        let (ok, passed, report) = validate_operator_kinds(&changed, "changed");
        if expect.is_empty() {
            assert!(ok && passed == 3, "{to}: {report}");
        } else {
            assert!(!ok && report.contains(expect), "{to}: {report}");
        }
    }
}
