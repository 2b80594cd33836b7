"""The labelled scenario corpus (tests/corpus/): every scenario loads, validates, runs
through the simulator and the real model, carries exactly the labels its README row lists,
and shows the signals its row describes.  No detector is run here; the corpus is what a
detector is scored on."""

from __future__ import annotations

import statistics
from functools import cache

import pytest

from corpus.corpus import CORPUS_DIR, EXCLUDED_BUILTINS, readme_labels, scenarios
from gpudisk_top.model.snapshot import Model
from gpudisk_top.sim import BUILTIN_NAMES, LABELS, Simulator, load_toml

MB_KB = 1024.0
MIN_STRETCH_S = 20.0   # a label lasts at least this long in the corpus files, to score onsets
NAMES = sorted([n for n in BUILTIN_NAMES if n not in EXCLUDED_BUILTINS]
               + [p.stem for p in CORPUS_DIR.glob("*.toml")])


@cache
def _scenario(name: str):
    return dict(scenarios())[name]


def _run(sim: Simulator, n: int) -> list[Model]:
    models, last = [], None
    for _ in range(n):
        sample = sim.sample()
        models.append(Model.new(sample, last))
        last = sample
    return models


def _phases(sim: Simulator, models: list[Model]) -> dict[str, list[Model]]:
    """Models by phase name, leaving out each stretch's first interval (which may still
    carry the previous phase)."""
    out: dict[str, list[Model]] = {}
    for i, m in enumerate(models[1:], 1):
        if sim.phase_at(i).name == sim.phase_at(i - 1).name:
            out.setdefault(sim.phase_at(i).name, []).append(m)
    return out


def mean(values) -> float:
    return statistics.fmean(values)


# ---------------------------------------------------------------------------- the whole corpus
def test_corpus_is_what_the_readme_lists_and_covers_every_label():
    found = scenarios()
    assert [name for name, _ in found] == NAMES  # sorted by name, no file lost or added
    assert sorted(readme_labels()) == NAMES
    assert "demo" not in NAMES
    used = {p.label for _, sc in found for p in sc.timeline()}
    assert used == set(LABELS)


def test_corpus_files_are_named_after_their_scenario():
    for path in sorted(CORPUS_DIR.glob("*.toml")):
        assert load_toml(str(path)).name == path.stem


@pytest.mark.parametrize("name", NAMES)
def test_corpus_scenario_loads_runs_two_passes_and_matches_its_readme_row(name):
    scenario = _scenario(name)
    scenario.validate()
    timeline = scenario.timeline()
    unlabelled = [p.name for p in timeline if p.label is None]
    assert not unlabelled, f"{name}: phase(s) without a label: {unlabelled}"
    sim = Simulator(scenario, seed=0)
    labels = sim.labels()
    assert set(labels) == readme_labels()[name]
    models = _run(sim, 2 * len(labels))
    assert len(models) == 2 * len(labels) and all(m.gpus for m in models)
    if name not in BUILTIN_NAMES:
        short = [s for s in _label_stretches(timeline) if s[1] < MIN_STRETCH_S]
        assert not short, f"{name}: label stretches under {MIN_STRETCH_S:.0f} s: {short}"


def _label_stretches(timeline) -> list[tuple[str, float]]:
    """(label, seconds) of each run of consecutive phases with the same label."""
    out: list[tuple[str, float]] = []
    for phase in timeline:
        if out and out[-1][0] == phase.label:
            out[-1] = (phase.label, out[-1][1] + phase.duration_s)
        else:
            out.append((phase.label, phase.duration_s))
    return out


# ---------------------------------------------------------------------------- each file's signals
def _disk_starved_hdd(sim, phases):
    for name, await_ms in (("sequential-misses", 35), ("random-misses", 58)):
        sdb = [m.disks["sdb"] for m in phases[name]]
        assert 30 <= mean(d.r_await_ms for d in sdb) <= 60
        assert mean(d.r_await_ms for d in sdb) == pytest.approx(await_ms, rel=0.05)
        assert mean(d.aqu_sz for d in sdb) >= 8 and mean(d.util_pct for d in sdb) >= 97
    assert mean(m.disks["sdb"].util_pct for m in phases["cached-shard"]) < 20


def _disk_starved_nvme(sim, phases):
    base_ms = sim.scenario.disk("nvme1n1").read_latency_ms
    assert base_ms == 0.1
    assert mean(m.disks["nvme1n1"].r_await_ms for m in phases["streaming"]) < 0.2
    for name, lo, hi in (("saturated", 2, 3), ("saturated-two-shards", 4.5, 5.5)):
        disk = [m.disks["nvme1n1"] for m in phases[name]]
        assert lo <= mean(d.r_await_ms for d in disk) <= hi
        assert mean(d.aqu_sz for d in disk) >= 64
        assert mean(d.rkb_s for d in disk) / MB_KB == pytest.approx(6800, rel=0.01)


def _disk_starved_not_visible(sim, phases):
    assert not sim.scenario.job.visible
    for m in (m for ms in phases.values() for m in ms):
        assert not set(m.sample.procs) & set(sim.job_pids) and set(m.sample.procs) == {7100}
        assert all(not p.mapped and p.local_pid is None for g in m.gpus for p in g.processes)
        assert all(len(g.processes) == 1 for g in m.gpus)
    vdb = [m.disks["vdb"] for m in phases["volume-bound"]]
    assert mean(d.util_pct for d in vdb) >= 97 and mean(d.r_await_ms for d in vdb) > 10


def _undiagnosed_stall(sim, phases):
    for m in phases["waiting-on-network"]:
        assert mean(g.util_pct for g in m.gpus) < 30 and all(g.processes for g in m.gpus)
        assert all(d.util_pct < 5 for d in m.disks.values())
        assert m.host.cpu_idle_pct > 90 and m.host.psi_io_some_pct < 1
        assert m.host.psi_cpu_some_pct < 1
        assert sum(v.wchar_kb_s or 0 for v in m.procs.values()) == 0
        assert m.host.dirty_kb < 100 * MB_KB


def _cpu_starved_host(sim, phases):
    job = set(sim.job_pids)
    transcode = phases["transcode"]
    assert mean(m.host.cpu_idle_pct for m in transcode) < 3
    for m in transcode:
        assert m.host.cpu_idle_pct < 15 and m.host.psi_cpu_some_pct > 55
        assert m.procs[31337].cpu_pct == pytest.approx(3500, rel=0.15)
        assert all(d.util_pct < 5 for d in m.disks.values())
    workers = [v.cpu_pct for m in transcode for v in m.procs.values()
               if v.root_pid in job and v.pid not in job]
    assert 30 <= mean(workers) <= 50
    assert all(m.procs[31337].cpu_pct == 0 for m in phases["train"])
    assert mean(m.host.cpu_idle_pct for m in phases["train"]) > 20


def _straggler_4gpu(sim, phases):
    for m in phases["gpu2-throttled"]:
        assert len(m.gpus) == 4 and m.gpus[2].util_pct < 50
        for g in (m.gpus[0], m.gpus[1], m.gpus[3]):
            assert g.util_pct >= 90 and g.power_avg_w < 0.5 * g.power_limit_w
    assert all(g.util_pct > 90 for m in phases["in-step"] for g in m.gpus)


def _checkpoint_hdd(sim, phases):
    rank0 = sim.job_pids[0]
    for m in phases["checkpoint-write"]:
        assert m.procs[rank0].wchar_kb_s / MB_KB == pytest.approx(450, rel=0.15)
    fsync = phases["checkpoint-fsync"]
    for m in fsync:
        assert m.procs[rank0].wchar_kb_s == 0 and all(g.util_pct < 5 for g in m.gpus)
    sdc = [m.disks["sdc"] for m in fsync]
    assert mean(d.wkb_s for d in sdc) / MB_KB > 150 and mean(d.w_await_ms for d in sdc) > 50
    stall = [p for p in sim.scenario.timeline()[:3] if p.label == "checkpoint-stall"]
    assert sum(p.duration_s for p in stall) >= 45


def _healthy_then_idle(sim, phases):
    assert not sim.scenario.loop
    for m in phases["backup"]:
        assert all(not g.processes and g.util_pct == 0 for g in m.gpus)
        assert m.disks["sda"].util_pct >= 92
    assert mean(m.disks["sda"].r_await_ms for m in phases["backup"]) == pytest.approx(6, rel=0.05)


SIGNALS = {
    "disk-starved-hdd": _disk_starved_hdd,
    "disk-starved-nvme": _disk_starved_nvme,
    "disk-starved-not-visible": _disk_starved_not_visible,
    "undiagnosed-stall": _undiagnosed_stall,
    "cpu-starved-host": _cpu_starved_host,
    "straggler-4gpu": _straggler_4gpu,
    "checkpoint-hdd": _checkpoint_hdd,
    "healthy-then-idle": _healthy_then_idle,
}


def test_every_corpus_file_has_a_signal_check():
    files = {p.stem for p in CORPUS_DIR.glob("*.toml")}
    assert files == set(SIGNALS) | {"flapping-noise"}


@pytest.mark.parametrize("name", sorted(SIGNALS))
def test_corpus_file_shows_the_signals_its_readme_row_describes(name):
    sim = Simulator(_scenario(name), seed=1)
    SIGNALS[name](sim, _phases(sim, _run(sim, len(sim.labels()))))


def test_flapping_noise_dips_last_one_interval():
    sim = Simulator(_scenario("flapping-noise"), seed=1)
    models = _run(sim, len(sim.labels()))
    low = [i for i, m in enumerate(models) if i and mean(g.util_pct for g in m.gpus) < 50]
    assert low == [i for i, p in enumerate(sim.phase_at(i) for i in range(len(models)))
                   if p.name.startswith("dip")]
    assert len(low) == 8 and all(b - a >= 20 for a, b in zip(low, low[1:]))
    assert set(sim.labels()) == {"healthy"}
    blips = [models[i].disks["sda"].r_await_ms for i in low[1::2]]
    assert all(b > 5 for b in blips)
    assert all(models[i].disks["sda"].r_await_ms < 2 for i in low[::2])
