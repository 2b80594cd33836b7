"""Issue 35, item 6 (the smaller findings), each on the real thing:

- 5,000 alert rules in a real config file load through the real command line in a
  bounded time (it took 29-36 s: each rule's line was found by scanning the file), and
  the load grows with the rules, not with their square;
- a mountpoint with a newline in the dashboard's and the replay's episode panel and
  verdict banner (Textual's Pilot, the simulator's checkpoint disk mounted at such a
  path): shown escaped, never a line of its own;
- /proc/meminfo with `MemTotal: -5 kB` through `--once` text and JSON (--procfs of this
  machine's own files): a warning, and no figure;
- a smartctl on PATH answering `available_spare: -7` through `--once`: left out, said,
  and the drive not judged failing on it;
- an alert command `sh -c 'sleep 1000 & ...; sleep 1000'` past its timeout: its child
  is gone too (checked by its PID), and nothing else is signalled.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from gpudisk_top import config
from gpudisk_top.alerts.actions import CommandRunner
from gpudisk_top.collect.source import simulated_source
from gpudisk_top.record.header import make_header
from gpudisk_top.record.writer import Recorder
from gpudisk_top.record import Recording
from gpudisk_top.sim import Simulator, builtin
from gpudisk_top.sim.scenario_toml import loads
from gpudisk_top.ui.replay_app import ReplayApp
from gpudisk_top.ui.screens.episodes import EpisodesScreen
from alert_rules import rules_text
from apps import dashboard_app
from cli_run import gdt
from fakeprocfs import FakeProcfs
from proctree import gone
from screen_text import screen_lines
from slack import slack

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "gpudisk_top" / "sim" / "scenarios"


# ---------------------------------------------------------------------------- alert rules
def test_5000_alert_rules_load_through_the_command_line_in_bounded_time(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text(rules_text(5000))
    t0 = time.monotonic()
    proc = gdt("--once", "--demo", "-i", "0.1", "--config", str(path))
    took_s = time.monotonic() - t0
    assert proc.returncode == 0, proc.stderr
    assert "verdict:" in proc.stdout
    # 0.35 s here on a quiet machine; 28.7 s before (every rule scanned the whole file)
    assert took_s < 8.0 * slack(), f"--once with 5,000 rules took {took_s:.1f} s"


def test_a_bad_5000th_rule_is_named_by_its_line_at_once(tmp_path):
    path = tmp_path / "config.toml"
    text = rules_text(5000, bad_last=True)
    path.write_text(text)
    line = text.splitlines().index("value = \"ninety\"") + 1
    t0 = time.monotonic()
    proc = gdt("--once", "--demo", "-i", "0.1", "--config", str(path))
    took_s = time.monotonic() - t0
    assert proc.returncode == 2
    assert proc.stderr.startswith("gpudisk-top: error: ") and proc.stderr.count("\n") == 1
    assert f"{path}: line {line}: alerts 'r4999': value must be a number" in proc.stderr
    assert took_s < 8.0 * slack(), took_s


def _load_s(path: Path) -> float:
    best = float("inf")
    for _ in range(3):             # the least of three: what the load costs, not the machine
        t0 = time.perf_counter()
        assert config.load(str(path), required=True).sections["alerts"]
        best = min(best, time.perf_counter() - t0)
    return best


def test_loading_rules_grows_with_their_number_not_its_square(tmp_path):
    small, large = tmp_path / "500.toml", tmp_path / "5000.toml"
    small.write_text(rules_text(500))
    large.write_text(rules_text(5000))
    ratio = _load_s(large) / _load_s(small)
    # 10 times the rules: ~10 times the time when linear, ~100 when quadratic (98 before)
    assert ratio < 30, f"5,000 rules took {ratio:.0f} times what 500 did"


def test_each_rule_keeps_the_line_of_its_own_header(tmp_path):
    path = tmp_path / "config.toml"
    text = "[detector]\nenter_intervals = 3\n\n" + rules_text(50)
    path.write_text(text)
    rules = config.load(str(path), required=True).sections["alerts"]
    headers = [n for n, line in enumerate(text.splitlines(), 1) if line == "[[alerts]]"]
    assert [r.line for r in rules] == headers


# ---------------------------------------------------------------------------- newline in a mount
NEWLINE_MOUNT = "/ckpt\nverdict: healthy"


def newline_scenario():
    """checkpoint-stalls with its checkpoint disk mounted at a path holding a newline:
    every minute a checkpoint-stall whose evidence names that mountpoint."""
    text = (SCENARIOS / "checkpoint-stalls.toml").read_text()
    assert 'mountpoint = "/checkpoints"' in text
    return loads(text.replace('mountpoint = "/checkpoints"',
                              'mountpoint = "/ckpt\\nverdict: healthy"'))


def assert_no_made_up_line(lines: list[str]) -> None:
    for line in lines:
        inner = line.strip(" │╭╮╰╯─▊▎")
        assert not inner.startswith("verdict: healthy"), f"a line made of the mountpoint: {line!r}"


def evidence_text(screen) -> str:
    return str(screen.query_one("#evidence").render())


async def test_the_dashboards_episode_panel_shows_a_mountpoints_newline_escaped():
    app = dashboard_app(Simulator(newline_scenario(), seed=0),
                        origin=simulated_source("checkpoint-stalls", 0))
    async with app.run_test(size=(120, 40)) as pilot:
        app.advance(58)                 # 8 s into the first checkpoint-stall
        await pilot.pause()
        banner = screen_lines(app)[1:4]
        assert any("CHECKPOINT-STALL" in line for line in banner), banner
        await pilot.press("e")
        await pilot.pause()
        assert isinstance(app.screen, EpisodesScreen)
        evidence = evidence_text(app.screen)
        assert "(/ckpt\\x0averdict: healthy)" in evidence, evidence
        assert "\nverdict: healthy" not in evidence
        assert_no_made_up_line(screen_lines(app))


async def test_the_banner_shows_a_mountpoints_newline_escaped_not_as_a_space():
    app = dashboard_app(Simulator(newline_scenario(), seed=0),
                        origin=simulated_source("checkpoint-stalls", 0))
    async with app.run_test(size=(250, 40)) as pilot:
        app.advance(58)
        await pilot.pause()
        top = " ".join(screen_lines(app)[1:6])
        assert "(/ckpt\\x0averdict:" in top, top
        assert "/ckpt verdict:" not in top


@pytest.fixture(scope="module")
def newline_recording(tmp_path_factory):
    path = tmp_path_factory.mktemp("nl") / "ckpt.gdtrec"
    origin = simulated_source("checkpoint-stalls", 0)
    sim = Simulator(newline_scenario(), seed=0)
    rec = Recorder(str(path), make_header(origin, 1.0))
    for _ in range(130):           # two checkpoint-stalls
        rec.append(sim.sample())
    rec.close("test")
    return str(path)


async def test_the_replays_episode_panel_shows_a_mountpoints_newline_escaped(newline_recording):
    rec = Recording.open(newline_recording)
    app = ReplayApp(rec, simulated_source("checkpoint-stalls", 0), start_index=0,
                    show_self=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert app.feed.known, "the recording's episodes"
        await pilot.press("e")
        await pilot.pause()
        assert isinstance(app.screen, EpisodesScreen)
        evidence = evidence_text(app.screen)
        assert "checkpoint-stall" in evidence and "\\x0averdict: healthy" in evidence, evidence
        assert "\nverdict: healthy" not in evidence
        assert_no_made_up_line(screen_lines(app))


def test_the_episode_note_keeps_its_own_lines_and_escapes_the_machines():
    screen = EpisodesScreen([], 0.0, note="the recording's 2 episodes\nnot a line of ours")
    assert screen.note_lines == ["the recording's 2 episodes\nnot a line of ours"]
    from gpudisk_top.textsafe import printable_block
    assert printable_block(screen.note_lines) == \
        "the recording's 2 episodes\\x0anot a line of ours"
    assert printable_block(["a", "b\x1b[2J"]) == "a\nb\\x1b[2J"


# ---------------------------------------------------------------------------- meminfo
@pytest.fixture
def procfs(tmp_path):
    """A --procfs of this machine's own host files (no disks: the host line is the
    point)."""
    return FakeProcfs(tmp_path / "proc").copy(
        "stat", "meminfo", "pressure/io", "pressure/cpu", "pressure/memory", "self/cgroup",
        "self/mountinfo", "1/mountinfo", "diskstats")


def set_meminfo(procfs: Path, **values: str) -> None:
    lines = (procfs / "meminfo").read_text().splitlines()
    for i, line in enumerate(lines):
        name = line.split(":")[0]
        if name in values:
            lines[i] = f"{name}:       {values[name]} kB"
    (procfs / "meminfo").write_text("\n".join(lines) + "\n")


def test_a_negative_memtotal_is_a_warning_and_no_figure_in_text(procfs):
    set_meminfo(procfs, MemTotal="-5")
    proc = gdt("--once", "--procfs", str(procfs), "-i", "0.2")
    assert proc.returncode == 0, proc.stderr
    memory = next(line for line in proc.stdout.splitlines() if line.startswith("memory:"))
    assert memory.startswith("memory: total n/a  available "), memory
    assert "-0.00" not in memory and "-5" not in memory
    assert "gpudisk-top: warning: meminfo: MemTotal -5 kB is impossible" in proc.stderr


def test_a_negative_memtotal_is_null_in_json_and_the_rest_stays(procfs):
    set_meminfo(procfs, MemTotal="-5")
    proc = gdt("--once", "--json", "--procfs", str(procfs), "-i", "0.2")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["host"]["mem_total_kb"] is None
    assert doc["host"]["mem_available_kb"] > 0 and doc["host"]["cached_kb"] >= 0
    assert any("MemTotal -5 kB is impossible" in w for w in doc["warnings"])


def test_a_part_of_memory_above_all_of_it_is_left_out(procfs):
    total = next(int(line.split()[1]) for line in (procfs / "meminfo").read_text().splitlines()
                 if line.startswith("MemTotal:"))
    set_meminfo(procfs, Cached=str(total + 1), Dirty="-1")
    proc = gdt("--once", "--json", "--procfs", str(procfs), "-i", "0.2")
    assert proc.returncode == 0, proc.stderr
    host = json.loads(proc.stdout)["host"]
    assert host["mem_total_kb"] == total and host["mem_available_kb"] > 0
    assert host["cached_kb"] is None and host["dirty_kb"] is None
    said = [w for w in json.loads(proc.stdout)["warnings"] if w.startswith("meminfo: ")]
    assert len(said) == 2, said
    assert f"Cached {total + 1} kB" in said[0] and "Dirty -1 kB" in said[1]


# ---------------------------------------------------------------------------- SMART ranges
def smartctl_answering(tmp_path: Path, **nvme) -> dict:
    """A smartctl on PATH that answers every disk with a real NVMe drive's JSON
    (tests/fixtures/health/nvme-7.1-healthy.json), these SMART / Health log fields set
    (power_on_hours in smartctl's power_on_time too, which it reads first)."""
    doc = json.loads((ROOT / "tests/fixtures/health/nvme-7.1-healthy.json").read_text())
    doc["nvme_smart_health_information_log"].update(nvme)
    if "power_on_hours" in nvme:
        doc["power_on_time"]["hours"] = nvme["power_on_hours"]
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (tmp_path / "answer.json").write_text(json.dumps(doc))
    (bindir / "smartctl").write_text(f"#!/bin/sh\ncat {tmp_path / 'answer.json'}\n")
    (bindir / "smartctl").chmod(0o755)
    return dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}")


def health_once(tmp_path: Path, env: dict, *extra: str) -> subprocess.CompletedProcess:
    from test_health_live import host_sysfs

    sysfs = host_sysfs(tmp_path)
    return gdt("--once", *extra, "-i", "1", "--sysfs", str(sysfs), env=env)


def test_a_negative_available_spare_is_left_out_and_said(tmp_path):
    env = smartctl_answering(tmp_path, available_spare=-7)
    proc = health_once(tmp_path, env, "--json")
    assert proc.returncode == 0, proc.stderr
    nvme = next(h for h in json.loads(proc.stdout)["health"] if h["device"] == "nvme0n1")
    assert nvme["available_spare_pct"] is None
    assert nvme["available_spare_threshold_pct"] == 10 and nvme["media_errors"] == 0
    # a spare of -7 % is no reading: the drive is judged on the rest (a healthy drive)
    assert nvme["status"] == "ok"
    assert nvme["reasons"] == ["available_spare_pct -7% is impossible (0 to 100%): left out"]


def test_a_negative_available_spare_is_not_in_the_text_table(tmp_path):
    env = smartctl_answering(tmp_path, available_spare=-7)
    proc = health_once(tmp_path, env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("Device  health"))
    columns = lines[head].replace(" C ", " ").split()     # "temp C" is one column
    row = next(line for line in lines[head:] if line.startswith("nvme0n1 "))
    cells = row.split()
    assert cells[columns.index("spare%")] == "-", row
    assert cells[1] == "ok" and "impossible" in row


@pytest.mark.parametrize("field,value,words", [
    ("percentage_used", -1, "percentage_used_pct -1% is impossible (0 to 255%)"),
    ("media_errors", -3, "media_errors -3 is impossible (0 to 2^128-1)"),
    ("power_on_hours", 10**12, "power_on_hours 1000000000000 h is impossible (0 to 1000000 h)"),
    ("available_spare_threshold", 300, "available_spare_threshold_pct 300% is impossible"),
])
def test_each_field_out_of_its_range_is_left_out(tmp_path, field, value, words):
    env = smartctl_answering(tmp_path, **{field: value})
    proc = health_once(tmp_path, env, "--json")
    assert proc.returncode == 0, proc.stderr
    nvme = next(h for h in json.loads(proc.stdout)["health"] if h["device"] == "nvme0n1")
    assert any(r.startswith(words) for r in nvme["reasons"]), nvme["reasons"]
    # no figure of the reading is it (a substring of the text would match a timing too:
    # "took_s": 0.00300886 held "300" in CI)
    assert value not in _numbers({k: v for k, v in nvme.items() if k != "reasons"})
    assert nvme["status"] == "ok"


def _numbers(value) -> list:
    """Every number in a JSON value, nested ones too."""
    if isinstance(value, dict):
        return [n for v in value.values() for n in _numbers(v)]
    if isinstance(value, list):
        return [n for v in value for n in _numbers(v)]
    return [value] if isinstance(value, (int, float)) and not isinstance(value, bool) else []


# ---------------------------------------------------------------------------- alert commands
def test_a_command_past_its_timeout_takes_its_children_with_it(tmp_path):
    pidfile = tmp_path / "child.pid"
    bystander = subprocess.Popen(["sleep", "1000"], start_new_session=True)
    warns: list[str] = []
    runner = CommandRunner(lambda kind, line: warns.append(line))
    try:
        argv = ["sh", "-c", f"sleep 1000 & echo $! > {pidfile}; sleep 1000"]
        assert runner.start("forever", argv, dict(os.environ), timeout_s=0.5)
        deadline = time.monotonic() + 10 * slack()
        while not (pidfile.exists() and pidfile.read_text().strip()):
            assert time.monotonic() < deadline, "the command never started its child"
            time.sleep(0.02)
        child = int(pidfile.read_text())
        assert not gone(child)
        (proc, *_), = runner._running.values()
        leader = proc.pid
        while runner.running:
            assert time.monotonic() < deadline + 10 * slack(), "never killed"
            time.sleep(0.05)
        assert warns == ["alert forever: command sh killed after 0.5 s"]
        assert gone(leader)
        until = time.monotonic() + 5 * slack()     # SIGKILL is delivered, then reaped
        while not gone(child) and time.monotonic() < until:
            time.sleep(0.02)
        assert gone(child), f"the command's child {child} outlived its timeout"
        assert bystander.poll() is None, "a process that is not the command's was killed"
    finally:
        runner.close(wait_s=0)
        bystander.kill()
        bystander.wait()


def test_commands_still_running_at_exit_take_their_children_with_them(tmp_path):
    pidfile = tmp_path / "child.pid"
    warns: list[str] = []
    runner = CommandRunner(lambda kind, line: warns.append(line))
    argv = ["sh", "-c", f"sleep 1000 & echo $! > {pidfile}; sleep 1000"]
    runner.start("forever", argv, dict(os.environ), timeout_s=600)
    deadline = time.monotonic() + 10 * slack()
    while not (pidfile.exists() and pidfile.read_text().strip()):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    child = int(pidfile.read_text())
    runner.close(wait_s=0.2)
    assert warns == ["alert forever: command sh still ran at exit; killed"]
    until = time.monotonic() + 5 * slack()
    while not gone(child) and time.monotonic() < until:
        time.sleep(0.02)
    assert gone(child), f"the command's child {child} outlived gpudisk-top"
