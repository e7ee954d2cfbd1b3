#!/usr/bin/env python3
"""Checks a rendered overlay (`kubectl kustomize deploy/overlays/X`) for what schema
validation cannot see: values that make no sense together, hardening left out, and Prometheus
Operator objects that do not match what they select.

    python3 deploy/lint.py RENDERED.yaml [RULES.yaml]

Prints one line per problem and exits 1 if there is any. With RULES.yaml, a PrometheusRule
must hold exactly its groups. Run by tests/tests/manifests.rs on every overlay.
"""
import re
import sys

import yaml

WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet"}


def duration_seconds(text):
    m = re.fullmatch(r"(\d+)(ms|s|m|h)", text)
    if not m:
        return None
    n, unit = int(m.group(1)), m.group(2)
    return n * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]


def flag(args, name):
    for a in args or []:
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


def check(docs, rules=None):
    problems = []
    say = problems.append
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d["kind"], []).append(d)
    workloads = {d["metadata"]["name"]: d for d in docs if d["kind"] in WORKLOADS}

    for name, w in workloads.items():
        spec = w["spec"]["template"]["spec"]
        pod_sc = spec.get("securityContext", {})
        if pod_sc.get("runAsNonRoot") is not True:
            say(f"{name}: pod does not set runAsNonRoot")
        if pod_sc.get("seccompProfile", {}).get("type") != "RuntimeDefault":
            say(f"{name}: pod seccompProfile is not RuntimeDefault")
        for c in spec.get("containers", []) + spec.get("initContainers", []):
            where = f"{name}/{c['name']}"
            sc = c.get("securityContext", {})
            if sc.get("readOnlyRootFilesystem") is not True:
                say(f"{where}: root filesystem is writable")
            if sc.get("allowPrivilegeEscalation") is not False:
                say(f"{where}: privilege escalation allowed")
            if "ALL" not in sc.get("capabilities", {}).get("drop", []):
                say(f"{where}: capabilities not all dropped")
            image = c.get("image", "")
            tag = image.rsplit("/", 1)[-1].partition(":")[2]
            if not tag or tag == "latest":
                say(f"{where}: image {image!r} is not pinned to a tag")
            if "resources" not in c or "requests" not in c["resources"]:
                say(f"{where}: no resource requests")
        # A draining worker must finish before the kubelet kills it.
        for c in spec.get("containers", []):
            drain = flag(c.get("args"), "--drain-timeout")
            if drain is not None:
                grace = spec.get("terminationGracePeriodSeconds", 30)
                d = duration_seconds(drain)
                if d is None or grace <= d:
                    say(f"{name}: terminationGracePeriodSeconds {grace} is not longer than --drain-timeout {drain}")
            if c["name"] == "worker" and "livenessProbe" not in c:
                say(f"{name}: the worker has no liveness probe")
            # kubelet's gRPC probes speak plaintext: against a TLS listener they fail, the
            # pod never turns ready and liveness restarts it in a loop.
            if flag(c.get("args"), "--tls-cert") is not None:
                for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                    if "grpc" in c.get(probe, {}):
                        say(f"{where}: {probe} is a gRPC probe on a TLS listener (kubelet cannot speak TLS to it); probe /readyz and /livez on the metrics port")

    for h in by_kind.get("HorizontalPodAutoscaler", []):
        s, name = h["spec"], h["metadata"]["name"]
        lo, hi = s.get("minReplicas", 1), s["maxReplicas"]
        if not 1 <= lo <= hi:
            say(f"HPA {name}: minReplicas {lo} and maxReplicas {hi} make no sense")
        target = s["scaleTargetRef"]["name"]
        if target not in workloads:
            say(f"HPA {name}: scales {target}, which is not in the overlay")
        down = s.get("behavior", {}).get("scaleDown", {}).get("stabilizationWindowSeconds")
        if down is None or down < 300:
            say(f"HPA {name}: scale-down stabilization below 5 minutes re-deals hosts too often")

    for p in by_kind.get("PodDisruptionBudget", []):
        name, s = p["metadata"]["name"], p["spec"]
        sel = s["selector"]["matchLabels"]
        matched = [w for w in workloads.values()
                   if all(w["spec"]["template"]["metadata"]["labels"].get(k) == v for k, v in sel.items())]
        if not matched:
            say(f"PDB {name}: selects no workload")
        for w in matched:
            replicas = w["spec"].get("replicas", 1)
            if isinstance(s.get("minAvailable"), int) and s["minAvailable"] >= replicas:
                say(f"PDB {name}: minAvailable {s['minAvailable']} blocks every drain of {replicas} replicas")

    services = {d["metadata"]["name"]: d for d in by_kind.get("Service", [])}
    for m in by_kind.get("ServiceMonitor", []):
        sel = m["spec"]["selector"]["matchLabels"]
        ports = {p["port"] for p in m["spec"]["endpoints"]}
        hits = [s for s in services.values()
                if all(s["metadata"].get("labels", {}).get(k) == v for k, v in sel.items())
                and ports <= {p.get("name") for p in s["spec"]["ports"]}]
        if not hits:
            say(f"ServiceMonitor {m['metadata']['name']}: no Service with labels {sel} and ports {ports}")
    for m in by_kind.get("PodMonitor", []):
        sel = m["spec"]["selector"]["matchLabels"]
        ports = {p["port"] for p in m["spec"]["podMetricsEndpoints"]}
        hits = [w for w in workloads.values()
                if all(w["spec"]["template"]["metadata"]["labels"].get(k) == v for k, v in sel.items())
                and ports <= {p.get("name") for c in w["spec"]["template"]["spec"]["containers"]
                              for p in c.get("ports", [])}]
        if not hits:
            say(f"PodMonitor {m['metadata']['name']}: no pods with labels {sel} and ports {ports}")
    if rules is not None:
        for r in by_kind.get("PrometheusRule", []):
            if r["spec"] != rules:
                say(f"PrometheusRule {r['metadata']['name']}: its groups differ from the rules file")
    return problems


def main():
    with open(sys.argv[1]) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    rules = None
    if len(sys.argv) > 2:
        with open(sys.argv[2]) as f:
            rules = yaml.safe_load(f)
    problems = check(docs, rules)
    for p in problems:
        print(p)
    print(f"{len(docs)} objects, {len(problems)} problems")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
