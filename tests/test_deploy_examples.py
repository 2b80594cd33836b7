"""The deployment examples hold together, offline: the Kubernetes manifests validate
against Kubernetes' own schemas (kubernetes-validate's bundled copies) and their selectors,
ports and labels meet; the Prometheus Operator's resources select the DaemonSet's pods and
give the target labels the rules group by; Prometheus accepts the scrape config (promtool,
which also checks the rules it loads); systemd accepts the unit (systemd-analyze verify);
and all of them serve and scrape one port.  A tool that is not installed skips its part,
saying so; none needs a network or a cluster."""

from __future__ import annotations

import configparser
import glob
import os
import re
import shutil
import subprocess
import sys

import pytest

from test_examples import _accepted

yaml = pytest.importorskip("yaml")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")
K8S = os.path.join(EXAMPLES, "k8s")
PROM = os.path.join(EXAMPLES, "prometheus")
UNIT = os.path.join(EXAMPLES, "systemd", "gpudisk-top.service")
PROMTOOL = shutil.which("promtool")
SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
JOB = "gpudisk-top"            # the job label examples/prometheus-rules.yml selects
PORT = 9425
# recursiveReadOnly, which daemonset.yaml sets, came with Kubernetes 1.30 (beta, on by
# default, in 1.31): the oldest version its comment promises
K8S_OLDEST = "1.31.0"


def docs(name: str) -> list[dict]:
    with open(os.path.join(K8S, name)) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def one(name: str, kind: str) -> dict:
    (doc,) = [d for d in docs(name) if d["kind"] == kind]
    return doc


def matches(selector: dict, labels: dict) -> bool:
    """A Kubernetes label selector (matchLabels only, as the examples use) against labels."""
    assert set(selector) == {"matchLabels"}, selector
    return selector["matchLabels"].items() <= labels.items()


def daemonset() -> dict:
    return one("daemonset.yaml", "DaemonSet")


def container() -> dict:
    (c,) = daemonset()["spec"]["template"]["spec"]["containers"]
    return c


def listen_port(args: list[str]) -> int:
    return int(args[args.index("--listen") + 1].rsplit(":", 1)[1])


# ---------------------------------------------------------------------------- Kubernetes
# kustomize patches: partial objects, validated once applied (test_the_health_patch_...)
PATCHES = ["health-patch.yaml"]
MANIFESTS = sorted(os.path.basename(p) for p in glob.glob(os.path.join(K8S, "*.yaml"))
                   if os.path.basename(p) not in PATCHES)


def test_the_manifests_are_the_ones_these_tests_know():
    assert MANIFESTS == ["daemonset.yaml", "kustomization.yaml", "podmonitor.yaml",
                         "servicemonitor.yaml", "sidecar.yaml"]
    assert all(os.path.exists(os.path.join(K8S, p)) for p in PATCHES)


@pytest.mark.parametrize("name", MANIFESTS)
def test_every_manifest_validates_against_kubernetes_schemas(name):
    kv = pytest.importorskip("kubernetes_validate", reason="pip install kubernetes-validate "
                             "(in the [test] extra)")
    versions = [v for v in dict.fromkeys([K8S_OLDEST, kv.latest_version()])
                if v in kv.utils.all_versions()]
    assert versions
    checked = 0
    for doc in docs(name):
        assert doc.get("apiVersion") and doc.get("kind"), doc
        if doc["kind"] == "Kustomization":
            continue    # kustomize's own file, never sent to a cluster (rendered below)
        assert doc["metadata"].get("name"), doc
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            continue    # custom resources: no bundled schema (their fields checked below)
        for v in versions:
            kv.validate(doc, v, strict=True)       # strict: an unknown field is an error
        checked += 1
    if name in ("daemonset.yaml", "sidecar.yaml", "servicemonitor.yaml"):
        assert checked


def test_the_daemonset_selects_its_own_pods_and_reads_the_host_read_only():
    ds = daemonset()
    tmpl = ds["spec"]["template"]
    assert matches(ds["spec"]["selector"], tmpl["metadata"]["labels"])
    pod = tmpl["spec"]
    assert pod["hostPID"] is True and pod["automountServiceAccountToken"] is False
    c = container()
    _accepted(c["args"])
    assert listen_port(c["args"]) == PORT
    assert c["ports"] == [{"name": "metrics", "containerPort": PORT}]
    sc = c["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
    assert "privileged" not in sc
    for m in c["volumeMounts"]:
        assert m["readOnly"] is True, m
    for v in pod["volumes"]:
        assert set(v) == {"name", "hostPath"} and v["hostPath"]["type"] == "Directory"


# The fields the Prometheus Operator's CRDs (monitoring.coreos.com/v1, operator 0.93) have
# where the examples write: Kubernetes prunes unknown fields of a custom resource, so a
# typo would silently leave the scrape without, say, its relabelings.
_SPEC = {"attachMetadata", "bodySizeLimit", "convertClassicHistogramsToNHCB",
         "fallbackScrapeProtocol", "jobLabel", "keepDroppedTargets", "labelLimit",
         "labelNameLengthLimit", "labelValueLengthLimit", "namespaceSelector",
         "nativeHistogramBucketLimit", "nativeHistogramMinBucketFactor", "podTargetLabels",
         "sampleLimit", "scrapeClass", "scrapeClassicHistograms", "scrapeNativeHistograms",
         "scrapeProtocols", "selector", "selectorMechanism", "targetLimit"}
_ENDPOINT = {"authorization", "basicAuth", "bearerTokenSecret", "enableHttp2", "filterRunning",
             "followRedirects", "honorLabels", "honorTimestamps", "interval",
             "metricRelabelings", "noProxy", "oauth2", "params", "path", "port",
             "proxyConnectHeader", "proxyFromEnvironment", "proxyUrl", "relabelings", "scheme",
             "scrapeTimeout", "targetPort", "tlsConfig", "trackTimestampsStaleness"}
CRD_FIELDS = {   # kind: (spec, its endpoints' key, an endpoint)
    "PodMonitor": (_SPEC | {"podMetricsEndpoints"}, "podMetricsEndpoints",
                   _ENDPOINT | {"portNumber"}),
    "ServiceMonitor": (_SPEC | {"endpoints", "serviceDiscoveryRole", "targetLabels"},
                       "endpoints", _ENDPOINT | {"bearerTokenFile"}),
}
RELABEL = {"sourceLabels", "separator", "targetLabel", "regex", "modulus", "replacement",
           "action"}


def monitor_targets(mon: dict, labels: dict) -> dict[str, str]:
    """The target labels the monitor gives: job from jobLabel (read from `labels`), the
    rest from relabelings (label -> the meta label it comes from)."""
    spec_fields, endpoints_key, endpoint_fields = CRD_FIELDS[mon["kind"]]
    spec = mon["spec"]
    assert set(spec) <= spec_fields, set(spec) - spec_fields
    assert spec["attachMetadata"] == {"node": True}      # node labels: training_job
    (ep,) = spec[endpoints_key]
    assert set(ep) <= endpoint_fields, set(ep) - endpoint_fields
    assert ep["interval"] == "15s" and ep["path"] == "/metrics"
    out = {}
    for r in ep["relabelings"]:
        assert set(r) <= RELABEL, set(r) - RELABEL
        (src,) = r["sourceLabels"]
        out[r["targetLabel"]] = src
    out["job"] = labels[spec["jobLabel"]]
    return out


def test_the_podmonitor_scrapes_the_daemonsets_pods_with_the_rules_labels():
    ds = daemonset()
    mon = one("podmonitor.yaml", "PodMonitor")
    pod_labels = ds["spec"]["template"]["metadata"]["labels"]
    assert matches(mon["spec"]["selector"], pod_labels)
    assert ds["metadata"]["namespace"] in mon["spec"]["namespaceSelector"]["matchNames"]
    (ep,) = mon["spec"]["podMetricsEndpoints"]
    assert ep["port"] in {p["name"] for p in container()["ports"]}
    assert monitor_targets(mon, pod_labels) == {
        "job": JOB,
        "node": "__meta_kubernetes_pod_node_name",
        "instance": "__meta_kubernetes_pod_node_name",     # stable across pod restarts
        "training_job": "__meta_kubernetes_node_label_training_job",   # node label training-job
    }


def test_the_servicemonitor_reaches_the_same_pods_through_a_headless_service():
    ds = daemonset()
    pod_labels = ds["spec"]["template"]["metadata"]["labels"]
    svc = one("servicemonitor.yaml", "Service")
    mon = one("servicemonitor.yaml", "ServiceMonitor")
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["selector"].items() <= pod_labels.items()
    assert svc["metadata"]["namespace"] == ds["metadata"]["namespace"]
    (port,) = svc["spec"]["ports"]
    assert port["targetPort"] in {p["name"] for p in container()["ports"]} and port["port"] == PORT
    assert matches(mon["spec"]["selector"], svc["metadata"]["labels"])
    assert svc["metadata"]["namespace"] in mon["spec"]["namespaceSelector"]["matchNames"]
    (ep,) = mon["spec"]["endpoints"]
    assert ep["port"] == port["name"]
    pod_monitor = monitor_targets(one("podmonitor.yaml", "PodMonitor"), pod_labels)
    # jobLabel reads the Service's labels here
    assert monitor_targets(mon, svc["metadata"]["labels"]) == pod_monitor


def test_the_kustomization_applies_the_daemonset_and_one_monitor():
    with open(os.path.join(K8S, "kustomization.yaml")) as f:
        k = yaml.safe_load(f)
    assert k["resources"] == ["daemonset.yaml", "podmonitor.yaml"]
    assert k["namespace"] == daemonset()["metadata"]["namespace"]


def kustomize(path: str) -> list[dict]:
    cmd = (["kubectl", "kustomize", path] if shutil.which("kubectl")
           else ["kustomize", "build", path])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "KUBECONFIG": os.devnull})
    assert proc.returncode == 0, proc.stderr
    return list(yaml.safe_load_all(proc.stdout))


HAVE_KUSTOMIZE = bool(shutil.which("kubectl") or shutil.which("kustomize"))


@pytest.mark.skipif(not HAVE_KUSTOMIZE,
                    reason="needs kubectl or kustomize (renders examples/k8s offline)")
def test_kustomize_renders_the_kustomization():
    kinds = [(d["kind"], d["metadata"]["namespace"]) for d in kustomize(K8S)]
    assert sorted(kinds) == [("DaemonSet", "monitoring"), ("PodMonitor", "monitoring")]


# ---------------------------------------------------------------------------- device health
HEALTH_OPT_IN = "# patches:\n#   - path: health-patch.yaml\n"


def _merge(base, patch):
    """A strategic merge patch as kustomize applies this one: objects merged key by
    key, containers by name, volumeMounts by mountPath, volumes by name, other lists
    (args, capabilities) replaced."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            out[k] = _merge(base[k], v) if k in base else v
        return out
    if isinstance(base, list) and isinstance(patch, list) and patch and isinstance(patch[0], dict):
        key = next(k for k in ("name", "mountPath") if k in patch[0])
        out = [dict(b) for b in base]
        for p in patch:
            i = next((j for j, b in enumerate(out) if b.get(key) == p[key]), None)
            if i is None:
                out.append(p)
            else:
                out[i] = _merge(out[i], p)
        return out
    return patch


def health_daemonset() -> dict:
    """The DaemonSet with health-patch.yaml applied: kustomize's rendering of the
    kustomization with its `patches` uncommented where kustomize is here, else _merge."""
    with open(os.path.join(K8S, "health-patch.yaml")) as f:
        patch = yaml.safe_load(f)
    return _merge(daemonset(), patch)


def test_the_daemonset_reads_no_disk_unless_opted_in():
    """By default the pod reads the kernel's disk temperatures (through /host/sys), and
    is given no disk: no /dev, no SYS_RAWIO or SYS_ADMIN, not privileged."""
    c = container()
    assert "--devfs" not in c["args"]
    assert {m["mountPath"] for m in c["volumeMounts"]} == {"/host/proc", "/host/sys"}
    assert c["securityContext"]["capabilities"]["add"] == ["SYS_PTRACE"]
    with open(os.path.join(K8S, "kustomization.yaml")) as f:
        text = f.read()
    assert HEALTH_OPT_IN in text and "health-patch.yaml" in open(
        os.path.join(K8S, "daemonset.yaml")).read()


def test_the_health_patch_gives_smartctl_the_nodes_disks_read_only():
    ds = health_daemonset()
    (c,) = ds["spec"]["template"]["spec"]["containers"]
    _accepted(c["args"])
    base = container()["args"]
    assert c["args"][:len(base)] == base and c["args"][len(base):] == ["--devfs", "/host/dev"]
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in ds["spec"]["template"]["spec"]["volumes"]}
    dev = mounts["/host/dev"]
    assert dev["readOnly"] is True and dev["recursiveReadOnly"] == "IfPossible"
    assert volumes[dev["name"]] == {"name": "dev", "hostPath": {"path": "/dev", "type": "Directory"}}
    assert set(mounts) == {"/host/proc", "/host/sys", "/host/dev"}
    assert all(m["readOnly"] is True for m in mounts.values())
    sc = c["securityContext"]
    assert {"SYS_PTRACE", "SYS_RAWIO", "SYS_ADMIN"} <= set(sc["capabilities"]["add"])
    # a pod's device cgroup admits a node's disk only to a privileged container; the API
    # server refuses privileged with allowPrivilegeEscalation false
    assert sc["privileged"] is True and sc["allowPrivilegeEscalation"] is True
    assert sc["readOnlyRootFilesystem"] is True
    kv = pytest.importorskip("kubernetes_validate")
    for v in dict.fromkeys([K8S_OLDEST, kv.latest_version()]):
        if v in kv.utils.all_versions():
            kv.validate(ds, v, strict=True)


@pytest.mark.skipif(not HAVE_KUSTOMIZE,
                    reason="needs kubectl or kustomize (renders examples/k8s offline)")
def test_kustomize_applies_the_health_patch_as_its_comment_says(tmp_path):
    for name in ("daemonset.yaml", "podmonitor.yaml", "health-patch.yaml"):
        shutil.copy(os.path.join(K8S, name), tmp_path / name)
    with open(os.path.join(K8S, "kustomization.yaml")) as f:
        text = f.read()
    (tmp_path / "kustomization.yaml").write_text(
        text.replace(HEALTH_OPT_IN, "patches:\n  - path: health-patch.yaml\n"))
    (ds,) = [d for d in kustomize(str(tmp_path)) if d["kind"] == "DaemonSet"]
    assert _unordered(ds) == _unordered(health_daemonset())


def _unordered(doc):
    """doc with its lists of named objects in name order (kustomize puts a patch's new
    volumes first)."""
    if isinstance(doc, dict):
        return {k: _unordered(v) for k, v in doc.items()}
    if isinstance(doc, list):
        items = [_unordered(x) for x in doc]
        if items and all(isinstance(x, dict) and "name" in x for x in items):
            items.sort(key=lambda x: x["name"])
        return items
    return doc


def test_the_image_has_smartctl():
    with open(os.path.join(EXAMPLES, "docker", "Dockerfile")) as f:
        lines = [x for x in f.read().splitlines() if not x.startswith("#")]
    text = "\n".join(lines).replace("\\\n", " ")
    install = [x for x in text.splitlines() if "apt-get install" in x]
    assert len(install) == 1 and "smartmontools" in install[0].split()
    assert "--no-install-recommends" in install[0] and "rm -rf /var/lib/apt/lists/*" in install[0]


# ---------------------------------------------------------------------------- Prometheus
def prometheus_config() -> dict:
    with open(os.path.join(PROM, "prometheus.yml")) as f:
        return yaml.safe_load(f)


def target_groups() -> dict[str, list[dict]]:
    (job,) = prometheus_config()["scrape_configs"]
    (sd,) = job["file_sd_configs"]
    out = {}
    for pattern in sd["files"]:
        for path in sorted(glob.glob(os.path.join(PROM, pattern))):
            with open(path) as f:
                out[os.path.relpath(path, PROM)] = yaml.safe_load(f)
    return out


def test_the_scrape_config_loads_the_rules_and_labels_every_node():
    cfg = prometheus_config()
    rule_files = [os.path.normpath(os.path.join(PROM, p)) for p in cfg["rule_files"]]
    assert rule_files == [os.path.join(EXAMPLES, "prometheus-rules.yml")]
    (job,) = cfg["scrape_configs"]
    assert job["job_name"] == JOB
    (relabel,) = job["relabel_configs"]
    assert relabel["target_label"] == "node"
    assert re.fullmatch(relabel["regex"], f"node17:{PORT}").group(1) == "node17"
    groups = target_groups()
    assert set(groups) == {"targets/llama-70b.yml", "targets/nodes.yml"}
    seen = []
    for name, file_groups in groups.items():
        for g in file_groups:
            assert set(g) == {"targets", "labels"}
            assert set(g["labels"]) <= {"training_job", "cluster"}
            assert ("training_job" in g["labels"]) == (name != "targets/nodes.yml")
            for t in g["targets"]:
                host, port = t.rsplit(":", 1)
                assert int(port) == PORT and host
                seen.append(t)
    assert len(seen) == len(set(seen)), "a node in two groups is scraped twice"


@pytest.mark.skipif(PROMTOOL is None, reason="needs promtool (Debian package prometheus)")
def test_promtool_checks_the_scrape_config_and_the_rules_it_loads():
    # from elsewhere: promtool resolves rule_files and file_sd against the file's folder
    proc = subprocess.run([PROMTOOL, "check", "config",
                           os.path.join(PROM, "prometheus.yml")],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "SUCCESS: 1 rule files found" in out and "is valid prometheus config" in out
    assert re.search(r"prometheus-rules\.yml\n\s+SUCCESS: \d+ rules found", out), out


# ---------------------------------------------------------------------------- systemd
def unit() -> configparser.ConfigParser:
    cp = configparser.ConfigParser(interpolation=None, strict=True)
    cp.optionxform = str                      # systemd keys are case-sensitive
    with open(UNIT) as f:
        cp.read_file(f)
    return cp


def test_the_unit_serves_on_every_interface_hardened():
    svc = unit()["Service"]
    exec_start = svc["ExecStart"].split()
    assert exec_start[0] == "/usr/local/bin/gpudisk-top"
    _accepted(exec_start[1:])
    assert exec_start[1] == "serve" and exec_start[2:] == ["--listen", f"0.0.0.0:{PORT}"]
    assert svc["Restart"] == "on-failure"
    caps = {"CAP_SYS_PTRACE", "CAP_DAC_READ_SEARCH"}
    assert set(svc["CapabilityBoundingSet"].split()) == caps
    assert set(svc["AmbientCapabilities"].split()) == caps
    for key, value in {"DynamicUser": "yes", "NoNewPrivileges": "yes",
                       "ProtectSystem": "strict", "ProtectHome": "read-only",
                       "ProtectKernelTunables": "yes", "ProtectControlGroups": "yes",
                       "PrivateTmp": "yes"}.items():
        assert svc[key] == value, key
    assert set(svc["ReadOnlyPaths"].split()) == {"/proc", "/sys"}
    # what would blind it: hidden processes, no GPUs' device files (ProtectClock before
    # systemd 252 implies DeviceAllow=char-rtc r, which denies every other device)
    for key in ("ProtectProc", "ProcSubset", "PrivateDevices", "DevicePolicy", "DeviceAllow",
                "ProtectClock"):
        assert key not in svc, key
    assert unit()["Install"]["WantedBy"] == "multi-user.target"


DROP_IN = os.path.join(EXAMPLES, "systemd", "gpudisk-top.service.d", "health.conf")


def test_the_health_drop_in_adds_the_two_capabilities_smartctl_needs():
    """SMART is an opt-in on systemd too: the unit reads the kernel's temperatures, the
    drop-in adds CAP_SYS_RAWIO (ATA/SCSI pass-through) and CAP_SYS_ADMIN (NVMe admin
    commands) to both lists, which systemd merges with the unit's."""
    svc = unit()["Service"]
    for key in ("AmbientCapabilities", "CapabilityBoundingSet"):
        assert not {"CAP_SYS_RAWIO", "CAP_SYS_ADMIN"} & set(svc[key].split())
    cp = configparser.ConfigParser(interpolation=None, strict=True)
    cp.optionxform = str
    with open(DROP_IN) as f:
        cp.read_file(f)
    assert cp.sections() == ["Service"]
    assert dict(cp["Service"]) == {"AmbientCapabilities": "CAP_SYS_RAWIO CAP_SYS_ADMIN",
                                   "CapabilityBoundingSet": "CAP_SYS_RAWIO CAP_SYS_ADMIN"}
    # opening the disk nodes (0660 root:disk) read-only: the unit's CAP_DAC_READ_SEARCH
    assert "CAP_DAC_READ_SEARCH" in svc["AmbientCapabilities"].split()


@pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="needs systemd-analyze (package systemd)")
def test_systemd_analyze_verifies_the_unit(tmp_path):
    # verify wants ExecStart's program to exist: this Python stands in for the one a
    # node installs at /usr/local/bin (its arguments are checked above)
    with open(UNIT) as f:
        text = f.read()
    assert text.count("/usr/local/bin/gpudisk-top serve") == 1
    copy = tmp_path / "gpudisk-top.service"
    copy.write_text(text.replace("/usr/local/bin/gpudisk-top serve", f"{sys.executable} serve"))
    # with the health drop-in beside it, where systemd-analyze reads drop-ins from
    (tmp_path / "gpudisk-top.service.d").mkdir()
    shutil.copy(DROP_IN, tmp_path / "gpudisk-top.service.d" / "health.conf")
    proc = subprocess.run([SYSTEMD_ANALYZE, "verify", "--man=no", str(copy)],
                          capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    if proc.returncode != 0 and "gpudisk-top.service" not in out:
        pytest.skip(f"systemd-analyze cannot run here: {out.strip()[:200]}")
    assert proc.returncode == 0, out
    # an unknown or misspelt key is only a warning to systemd, and ignored
    assert "gpudisk-top.service" not in out, out


def test_one_port_everywhere():
    ports = {
        "daemonset": listen_port(container()["args"]),
        "systemd": listen_port(unit()["Service"]["ExecStart"].split()),
        "file_sd": {int(t.rsplit(":", 1)[1]) for gs in target_groups().values()
                    for g in gs for t in g["targets"]},
        "service": one("servicemonitor.yaml", "Service")["spec"]["ports"][0]["port"],
    }
    assert ports == {"daemonset": PORT, "systemd": PORT, "file_sd": {PORT}, "service": PORT}


def test_the_manuals_prometheusrule_command_wraps_the_rules_file(tmp_path):
    """The one-liner in docs/containers.md that turns the rules file into a PrometheusRule,
    run with `cat` for kubectl: its spec is the rules file."""
    with open(os.path.join(ROOT, "docs", "containers.md")) as f:
        page = f.read()
    (cmd,) = re.findall(r"^(\{ printf 'apiVersion: monitoring\.coreos\.com/v1.*?\n.*?)"
                        r" \| kubectl apply -f -$", page, re.M)
    proc = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, cwd=ROOT,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    doc = yaml.safe_load(proc.stdout)
    assert doc["kind"] == "PrometheusRule" and doc["metadata"]["namespace"] == "monitoring"
    with open(os.path.join(EXAMPLES, "prometheus-rules.yml")) as f:
        assert doc["spec"] == yaml.safe_load(f)
