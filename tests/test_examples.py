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
FLEET_RULES = os.path.join(ROOT, "examples", "fleet-rules.yml")   # the fleet view's records
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


RECORDED_RE = re.compile(r"\b(gpudisk_top:[a-z0-9_:]+)")


def rule_texts() -> tuple[list[dict], list[str]]:
    """(every rule, every PromQL text in them: exprs and the annotations' queries)."""
    yaml = pytest.importorskip("yaml")
    with open(RULES) as f:
        doc = yaml.safe_load(f)
    rules = [r for g in doc["groups"] for r in g["rules"]]
    texts = [r["expr"] for r in rules]
    texts += [a for r in rules for a in r.get("annotations", {}).values()]
    return rules, texts


def test_rules_use_only_served_metrics():
    names = served_names() | {"up"}
    rules, texts = rule_texts()
    assert len(rules) >= 5
    used = {m for e in texts for m in METRIC_RE.findall(e)}
    assert used <= names, used - names
    # and every recorded series they read is recorded here
    recorded = {r["record"] for r in rules if "record" in r}
    read = {m for e in texts for m in RECORDED_RE.findall(e)}
    assert read <= recorded, read - recorded


def test_the_fleet_rules_group_by_the_scrape_configs_target_labels():
    yaml = pytest.importorskip("yaml")
    with open(RULES) as f:
        groups = {g["name"]: g["rules"] for g in yaml.safe_load(f)["groups"]}
    assert set(groups) == {"gpudisk-top", "gpudisk-top-fleet", "gpudisk-top-health"}
    fleet = groups["gpudisk-top-fleet"]
    records = [r["record"] for r in fleet if "record" in r]
    alerts = [r["alert"] for r in fleet if "alert" in r]
    assert {"gpudisk_top:node_starved:bool", "gpudisk_top:nodes_starved:count",
            "gpudisk_top:job_gpu_utilization:avg", "gpudisk_top:job_slowest_node"} <= set(records)
    assert {"FleetNodesStarved", "JobStraggler"} <= set(alerts)
    # the records come first: a group evaluates in order, so its alerts read this
    # evaluation's records
    kinds = ["record" in r for r in fleet]
    assert kinds == sorted(kinds, reverse=True)
    # a job is (cluster, training_job) wherever the rules aggregate per job
    for r in fleet:
        for by in re.findall(r"\bby \(([^)]*)\)", r["expr"]):
            if "training_job" in by:
                assert "cluster" in by, (r.get("record") or r.get("alert"), by)
    node = [r["alert"] for r in groups["gpudisk-top"]]
    assert "GpudiskTopExporterDown" in node and "up{job=\"gpudisk-top\"}" in next(
        r["expr"] for r in groups["gpudisk-top"] if r["alert"] == "GpudiskTopExporterDown")


def test_the_fleet_views_rules_record_what_the_fleet_reads():
    """examples/fleet-rules.yml records the series gpudisk_top/fleet/queries.py reads in
    its recorded form, from served metrics only, one series per node (the GPU's labels
    dropped), and never a name prometheus-rules.yml records (both may be loaded)."""
    yaml = pytest.importorskip("yaml")
    from gpudisk_top.fleet import queries

    with open(FLEET_RULES) as f:
        rules = [r for g in yaml.safe_load(f)["groups"] for r in g["rules"]]
    records = [r["record"] for r in rules]
    assert sorted(records) == sorted(queries.RECORDED + queries.LEDGER_RECORDED)
    assert all("alert" not in r for r in rules)
    used = {m for r in rules for m in METRIC_RE.findall(r["expr"])}
    assert used <= served_names(), used - served_names()
    for r in rules:
        if "gpu_utilization_ratio" in r["expr"]:
            assert "without (gpu, uuid)" in r["expr"], r
    others, _ = rule_texts()
    assert not set(records) & {r.get("record") for r in others}


LEDGER_DASHBOARD = os.path.join(ROOT, "examples", "grafana-fleet-ledger.json")


def ledger_panel_exprs() -> list[str]:
    with open(LEDGER_DASHBOARD) as f:
        return exprs(json.load(f))


def test_the_ledger_panels_read_the_ledgers_counters_and_records():
    """examples/grafana-fleet-ledger.json: every query reads the ledger's counter or
    fleet-rules.yml's records of it, never cause="healthy" as lost, and GPU-hours are
    GPU-seconds / 3600 (its figures read as the fleet's and the dashboard's)."""
    yaml = pytest.importorskip("yaml")
    with open(FLEET_RULES) as f:
        recorded = {r["record"] for g in yaml.safe_load(f)["groups"] for r in g["rules"]}
    found = ledger_panel_exprs()
    assert len(found) >= 4
    for e in found:
        assert set(RECORDED_RE.findall(e)) <= recorded, e
        assert set(METRIC_RE.findall(e)) <= {"gpudisk_top_gpu_seconds_total"}, e
        assert "gpudisk_top_gpu_seconds_total" not in e or 'cause!="healthy"' in e, e
        assert "seconds_lost" not in e or e.endswith("/ 3600"), e


@pytest.mark.skipif(PROMTOOL is None, reason="needs promtool (Debian package prometheus)")
def test_promtool_checks_the_ledger_panels_queries(tmp_path):
    """The panels' queries, each a recording rule of a file promtool checks (it parses
    the PromQL, and would say of a bad one where)."""
    yaml = pytest.importorskip("yaml")
    rules = [{"record": f"gpudisk_top:grafana_ledger_panel_{i}:query", "expr": e}
             for i, e in enumerate(ledger_panel_exprs())]
    path = tmp_path / "ledger-panels.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "ledger-panels", "rules": rules}]}))
    proc = subprocess.run([PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(rules)} rules found" in proc.stdout


@pytest.mark.skipif(PROMTOOL is None, reason="needs promtool (Debian package prometheus)")
@pytest.mark.parametrize("rules", [RULES, FLEET_RULES], ids=os.path.basename)
def test_promtool_checks_the_rules(rules):
    proc = subprocess.run([PROMTOOL, "check", "rules", rules], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


@pytest.mark.skipif(PROMTOOL is None, reason="needs promtool (Debian package prometheus)")
@pytest.mark.parametrize("tests", ["rules_test.yml", "fleet_rules_test.yml",
                                   "fleet_view_rules_test.yml"])
def test_promtool_unit_tests_of_the_rules(tests):
    proc = subprocess.run([PROMTOOL, "test", "rules", tests], capture_output=True,
                          text=True, cwd=os.path.join(ROOT, "tests", "prometheus"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


def test_every_promtool_unit_test_file_is_run():
    found = {f for f in os.listdir(os.path.join(ROOT, "tests", "prometheus"))
             if f.endswith("_test.yml")}
    assert found == {"rules_test.yml", "fleet_rules_test.yml", "fleet_view_rules_test.yml"}, found


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
    assert c["args"][0] == "serve" and "--sysfs" in c["args"] and "--procfs" in c["args"]
    port = c["args"][c["args"].index("--listen") + 1].rsplit(":", 1)[1]
    assert c["ports"][0]["containerPort"] == int(port)
    assert ds["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"] == port
    # the host's /proc and /sys, read-only, submounts too where the runtime can
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    for opt, host in (("--procfs", "/proc"), ("--sysfs", "/sys")):
        mount = mounts[c["args"][c["args"].index(opt) + 1]]
        assert mount["readOnly"] is True and mount["recursiveReadOnly"] == "IfPossible"
        assert volumes[mount["name"]]["hostPath"]["path"] == host
    assert set(mounts) == {"/host/proc", "/host/sys"}          # nothing writable
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
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
