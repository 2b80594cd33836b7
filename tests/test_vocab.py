"""The one vocabulary (model/vocab.py): each family matches the model's dataclasses, names
carry their units, Prometheus names their base units, and every output takes its names
and its verdict and episode JSON from it."""

from __future__ import annotations

from dataclasses import fields

from model_factory import gpu, model
from gpudisk_top.alerts import catalog
from gpudisk_top.model import cgjob_words, metric, vocab
from gpudisk_top.verdict.detect import Episode, Verdict
from gpudisk_top.verdict.detect.evidence import Culprit
from gpudisk_top.model.disk import RATE_FIELDS
from gpudisk_top.model.gpu import GpuProcessView, GpuView, gpu_as_json
from gpudisk_top.model.host import HOST_FIELDS, host_as_json
from gpudisk_top.model.procs import tree_totals
from gpudisk_top.output.once import disk_json, gpus_json
from gpudisk_top.report import export

FAMILIES = (vocab.DISK, vocab.TIMELINE, vocab.GPU, vocab.GPU_COMPUTED, vocab.GPU_PROCESS,
            vocab.GPU_PROCESS_IO, vocab.HOST, vocab.MOUNT, vocab.HEALTH, vocab.HEALTH_COMPUTED,
            vocab.LEDGER, cgjob_words.JOB_CGROUP)

# a name ending so is in that unit (STYLE.md: units in names)
NAME_UNITS = (("_kb_s", "kB/s"), ("_pct", "%"), ("_ms", "ms"), ("_kb", "kB"), ("_mib", "MiB"),
              ("_mhz", "MHz"), ("_w", "W"), ("_c", "C"), ("_min", "min"), ("_hours", "h"),
              ("_gpu_s", "GPU-s"))
# the base unit a Prometheus name ends with, per model unit
PROM_SUFFIX = {"%": "_ratio", "ms": "_seconds", "kB/s": "_bytes_per_second", "kB": "_bytes",
               "MiB": "_bytes", "/s": "_per_second", "W": "_watts", "C": "_celsius",
               "MHz": "_hertz", "min": "_seconds", "h": "_seconds",
               "GPU-s": "_seconds"}
# published names that break the rule, kept as they are (dashboards query them): bytes
# read through read() are "chars" after /proc/PID/io's rchar; the stall ledger's seconds
# by device (its name agreed with the fleet's recording rules, issue 28)
PROM_NAMES_KEPT = {"gpu_process_read_chars_per_second", "gpu_seconds_by_device"}


def test_families_are_the_model_dataclasses():
    assert vocab.DISK.fields == RATE_FIELDS
    assert vocab.HOST.fields == tuple(f for f in HOST_FIELDS if f not in ("cgroup_path", "cgroup_io"))
    gpu_fields = {f.name for f in fields(GpuView)}
    assert set(vocab.GPU.fields) <= gpu_fields and "lost" in gpu_fields
    assert set(vocab.GPU_PROCESS.fields) <= {f.name for f in fields(GpuProcessView)}
    assert set(vocab.GPU_PROCESS_IO.fields) <= set(tree_totals({}, 1))
    assert vocab.AVG_CPU == tuple(m for m in vocab.HOST if m.field.startswith("cpu_"))
    from gpudisk_top.model.mounts import MountView
    assert set(vocab.MOUNT.fields) <= {f.name for f in fields(MountView)}
    from gpudisk_top.collect.sample import DiskHealth
    assert set(vocab.HEALTH.fields) <= {f.name for f in fields(DiskHealth)}
    # a job's cgroup series: exactly the figures cgroup_figures takes of its interval
    from gpudisk_top.model.cgjob import CgJobInterval
    figures = cgjob_words.cgroup_figures(CgJobInterval(path="/job", elapsed_s=1.0, cpu_pct=50.0))
    assert cgjob_words.JOB_CGROUP.fields == tuple(figures)


def test_units_are_in_the_names():
    for family in FAMILIES:
        for m in family:
            for suffix, unit in NAME_UNITS:
                if m.field.endswith(suffix):
                    assert m.unit == unit, m
                    break
            else:
                if m.field.endswith("_s"):
                    assert m.unit.endswith("/s"), m      # a rate per second


def test_prometheus_names_are_in_base_units_and_each_family_has_one_help():
    helps: dict[str, str] = {}
    for family in FAMILIES:
        for m in family:
            if m.prom is None:
                continue
            if m.unit in PROM_SUFFIX and m.prom not in PROM_NAMES_KEPT:
                assert m.prom.endswith(PROM_SUFFIX[m.unit]), m
            assert helps.setdefault(m.prom, m.prom_help) == m.prom_help, m
            # a family shared by several metrics tells them apart by a label
            assert (m.prom_label is not None) == (m.prom in metric.PROM_FAMILY_HELP), m
    assert vocab.DISK["r_await_ms"].prom_factor == 0.001 and vocab.GPU["temp_c"].prom_factor == 1


def test_qualified_names_are_what_alerts_and_csv_use():
    names = [f.qualified(m) for f in (vocab.DISK, vocab.GPU, vocab.GPU_COMPUTED, vocab.HOST,
                                      vocab.HEALTH, vocab.HEALTH_COMPUTED)
             for m in f if m.alert]
    assert len(set(names)) == len(names) and tuple(names) == catalog.METRICS
    assert "disk_r_await_ms" in names and "host_psi_io_some_pct" in names and "gpu_lost" in names
    assert "host_ncpu" not in names
    csv_names = [f.qualified(m) for f in (vocab.GPU, vocab.DISK, vocab.HOST) for m in f if m.csv]
    assert export.CSV_COLUMNS[6:] == tuple(csv_names)


def test_json_outputs_have_the_vocabulary_keys():
    m = model(1, gpus=[gpu(0, pids=[4242])])
    disk = disk_json(m, "sda")
    assert [k for k in disk if k in vocab.DISK.fields] == [x.json_key for x in vocab.DISK]
    g = gpus_json(m)[0]
    assert {x.json_key for x in vocab.GPU} <= set(gpu_as_json(m.gpus[0])) <= set(g)
    proc = g["processes"][0]
    for x in (*vocab.GPU_PROCESS, *vocab.GPU_PROCESS_IO):
        assert x.json_key in proc, x
    assert proc["tree_processes"] == 1          # the one key that is not its field's name
    assert {x.json_key for x in vocab.HOST} <= set(host_as_json(m.host))


def test_verdict_and_episode_json():
    fio = Culprit(pid=912, name="fio", device="sda", read_share_pct=88.4, read_kb_s=12000.04)
    ep = Episode(id=2, state="disk-starved", start_wall_s=100.0, last_wall_s=112.5, gpus=[0, 1],
                 devices=["sda"], processes=[42], reason="GPU 0-1 at 20% for 12 s", kind="saturated",
                 intervals=12, min_util_pct=19.96, culprits=[fio])
    v = Verdict(wall_s=112.5, state="disk-starved", raw_state="disk-starved", gpus=[0, 1],
                devices=["sda"], processes=[42], reason=ep.reason, advice="cache it",
                kind="saturated", episode=ep, culprits=[fio])
    culprits = [{"pid": 912, "name": "fio", "device": "sda", "read_share_pct": 88.4,
                 "read_kb_s": 12000.0, "job_id": None, "job_name": None, "pids": [912]}]
    assert vocab.verdict_json(v) == {"state": "disk-starved", "job_id": None, "job_name": None,
                                     "gpus": [0, 1], "devices": ["sda"],
                                     "processes": [42], "reason": ep.reason, "advice": "cache it",
                                     "kind": "saturated", "culprits": culprits, "whatif": []}
    assert vocab.verdict_json(None) is None
    j = vocab.episode_json(ep)
    assert list(j) == ["id", "state", "job_id", "job_name", "start", "end", "start_s", "end_s", "duration_s", "gpus",
                       "devices", "processes", "reason", "advice", "kind", "min_util_pct",
                       "intervals", "lost_gpu_s", "culprits", "whatif", "mean_util_pct",
                       "culprits_summed", "phases"]
    assert j["culprits"] == culprits
    # still open: it ends at its latest interval in its state
    assert j["end_s"] == 112.5 and j["duration_s"] == 12.5 and j["min_util_pct"] == 20.0
    assert j["start"] == vocab.iso_time(100.0)
