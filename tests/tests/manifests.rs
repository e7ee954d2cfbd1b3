//! `deploy/`: the Kubernetes manifests build with kustomize and validate strictly against
//! the Kubernetes schemas (`kubectl kustomize`, `kubernetes-validate --strict`, both offline).
//! Skipped without the tools, except under CI, where their absence is a failure.

use std::path::Path;
use std::process::Command;

fn have(tool: &str) -> bool {
    Command::new(tool).arg("--help").output().is_ok()
}

#[test]
fn kustomize_builds_and_every_resource_validates() {
    if !have("kubectl") || !have("kubernetes-validate") {
        assert!(
            std::env::var_os("CI").is_none(),
            "kubectl and kubernetes-validate are needed (.ci/run installs kubernetes-validate)"
        );
        eprintln!("skipped: kubectl or kubernetes-validate is not installed");
        return;
    }
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy");
    let built = Command::new("kubectl")
        .arg("kustomize")
        .arg(&deploy)
        .output()
        .expect("run kubectl kustomize");
    assert!(
        built.status.success(),
        "kubectl kustomize failed: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    let text = String::from_utf8(built.stdout).unwrap();
    for kind in [
        "StatefulSet",
        "Deployment",
        "Service",
        "ConfigMap",
        "NetworkPolicy",
    ] {
        assert!(
            text.contains(&format!("kind: {kind}\n")),
            "no {kind} in:\n{text}"
        );
    }
    let dir = std::env::temp_dir().join(format!("kairos-manifests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("kairos.yaml");
    std::fs::write(&file, &text).unwrap();
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
    assert!(checked.status.success(), "{report}");
    assert_eq!(report.matches(" passed ").count(), 7, "{report}");
    // Every role needs credentials: the coordinator reads a token file, workers a token.
    assert!(
        text.contains("--tokens=/etc/kairos/tokens/tokens"),
        "{text}"
    );
    assert!(
        text.contains("--token-file=/etc/kairos/worker/token"),
        "{text}"
    );
    assert!(!text.contains("--insecure-loopback"), "{text}");
}
