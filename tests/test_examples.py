"""examples/: the Grafana dashboard and the Prometheus rules use only metrics the exporter
serves, and promtool accepts the rules and their unit tests."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest
from prometheus_client.parser import text_string_to_metric_families

from test_exporter import fed_server

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DASHBOARD = os.path.join(ROOT, "examples", "grafana-dashboard.json")
RULES = os.path.join(ROOT, "examples", "prometheus-rules.yml")
PROMTOOL = shutil.which("promtool")
METRIC_RE = re.compile(r"\b((?:gpudisk_top|process)_[a-z0-9_]+)")


def served_names() -> set[str]:
    names = set()
    for fam in text_string_to_metric_families(fed_server().render_text()):
        names.add(fam.name)
        names.update(s.name for s in fam.samples)
    return names


def dashboard():
    with open(DASHBOARD) as f:
        return json.load(f)


def exprs(doc) -> list[str]:
    found = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            if k in ("expr", "query", "definition") and isinstance(v, str):
                found.append(v)
            else:
                found += exprs(v)
    elif isinstance(doc, list):
        for v in doc:
            found += exprs(v)
    return found


def test_dashboard_uses_only_served_metrics():
    names = served_names()
    used = {m for e in exprs(dashboard()) for m in METRIC_RE.findall(e)}
    assert used and used <= names, used - names


def test_dashboard_puts_gpu_utilization_and_disk_await_on_one_time_axis():
    d = dashboard()
    first = d["panels"][0]
    assert first["type"] == "timeseries"
    queries = " ".join(t["expr"] for t in first["targets"])
    assert "gpudisk_top_gpu_utilization_ratio" in queries
    assert "gpudisk_top_disk_read_await_seconds" in queries
    assert first["fieldConfig"]["defaults"]["unit"] == "percentunit"
    right = [o for o in first["fieldConfig"]["overrides"]
             if {"id": "custom.axisPlacement", "value": "right"} in o["properties"]]
    assert right and all({"id": "unit", "value": "s"} in o["properties"] for o in right)
    (episodes,) = [a for a in d["annotations"]["list"] if a.get("expr")]
    assert "gpudisk_top_state" in episodes["expr"] and episodes["titleFormat"] == "{{state}}"
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids)) and d["uid"] == "gpudisk-top"
    for p in d["panels"]:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24 and g["h"] > 0


def test_rules_use_only_served_metrics():
    names = served_names() | {"up"}
    with open(RULES) as f:
        text = f.read()
    rule_exprs = re.findall(r"^\s*expr:\s*(.+)$", text, re.M)
    assert len(rule_exprs) >= 5
    used = {m for e in rule_exprs for m in METRIC_RE.findall(e)}
    assert used <= names, used - names


@pytest.mark.skipif(PROMTOOL is None, reason="needs promtool (Debian package prometheus)")
def test_promtool_checks_the_rules():
    proc = subprocess.run([PROMTOOL, "check", "rules", RULES], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


@pytest.mark.skipif(PROMTOOL is None, reason="needs promtool (Debian package prometheus)")
def test_promtool_unit_tests_of_the_rules():
    proc = subprocess.run([PROMTOOL, "test", "rules", "rules_test.yml"], capture_output=True,
                          text=True, cwd=os.path.join(ROOT, "tests", "prometheus"))
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ---------------------------------------------------------------------------- Kubernetes
K8S = os.path.join(ROOT, "examples", "k8s")


def _k8s(name: str) -> dict:
    yaml = pytest.importorskip("yaml")
    with open(os.path.join(K8S, name)) as f:
        return yaml.safe_load(f)


def _accepted(args: list[str]) -> None:
    """gpudisk-top's own parser takes these arguments (parsing runs nothing)."""
    import importlib

    from gpudisk_top.commands import COMMANDS

    name, rest = args[0], args[1:]
    assert name in COMMANDS, name
    module = importlib.import_module(COMMANDS[name][0])
    module.build_parser(f"gpudisk-top {name}").parse_args(rest)


def test_the_daemonset_serves_from_the_host_pid_namespace_without_reserving_a_gpu():
    ds = _k8s("daemonset.yaml")
    assert ds["kind"] == "DaemonSet"
    pod = ds["spec"]["template"]["spec"]
    assert pod["hostPID"] is True
    (c,) = pod["containers"]
    _accepted(c["args"])
    assert c["args"][0] == "serve" and "--sysfs" in c["args"]
    port = c["args"][c["args"].index("--listen") + 1].rsplit(":", 1)[1]
    assert c["ports"][0]["containerPort"] == int(port)
    assert ds["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"] == port
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    sysfs = c["args"][c["args"].index("--sysfs") + 1]
    assert mounts[sysfs]["readOnly"] is True
    assert "nvidia.com/gpu" not in str(c.get("resources"))      # no GPU taken from the jobs
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"} in c["env"]
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["SYS_PTRACE"]}


def test_the_sidecar_shares_the_pods_pid_namespace_and_records():
    pod = _k8s("sidecar.yaml")
    assert pod["spec"]["shareProcessNamespace"] is True
    side = next(c for c in pod["spec"]["containers"] if c["name"] == "gpudisk-top")
    _accepted(side["args"])
    out = side["args"][side["args"].index("-o") + 1]
    assert any(out.startswith(m["mountPath"] + "/") for m in side["volumeMounts"])
