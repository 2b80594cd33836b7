"""Issue 23, items 10 and 11: at 80x24 what is cut is what matters least, and the small
things a user trips on (keys htop's and nvitop's users press, flags for what the screen
leaves out, the device detail's header and footer, toasts in the user's words), each
through Textual's Pilot as a user drives it; the simulator at a fixed seed, except where
the real sampler, a real process and a real disk are the point."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import time

import pytest

import realdisk
from gpudisk_top.collect.gpu import GpuCollector
from gpudisk_top.collect.roots import Roots
from gpudisk_top.collect.sampler import Sampler
from gpudisk_top.collect.visibility import NO_PSI, NO_SYSFS, NOT_ROOT, PID_NAMESPACE
from gpudisk_top.model.vocab import DISK, TIMELINE
from gpudisk_top.output.once import render_text
from gpudisk_top.model.select import DeviceFilter
from gpudisk_top.record import Recording
from gpudisk_top.record.header import make_header
from gpudisk_top.record.writer import Recorder
from gpudisk_top.sim.fake_nvml import FakeNvml
from gpudisk_top.ui.screens.device import DeviceDetail, DeviceScreen
from gpudisk_top.ui.screens.help import HelpScreen
from gpudisk_top.ui.screens.hidden import HiddenScreen
from gpudisk_top.ui.widgets.disks import DiskPanel
from gpudisk_top.ui.widgets.header import BLIND_SPOT_FLAGS, SHORT_WORD
from gpudisk_top.ui.widgets.ioprocs import IoProcPanel
from gpudisk_top.ui.widgets.timeline import Timeline
from gpudisk_top.collect.source import LIVE, Source
from apps import ORIGIN, dashboard_app
from screen_text import screen_text, text_of

SMALL = (80, 24)


def header_flags(app) -> list[str]:
    """The header's parts as a user reads them (flags stand apart by two spaces or more)."""
    return re.split(r"\s{2,}", screen_text(app).splitlines()[0].strip())


def toasts(app) -> list[str]:
    return [str(n.message) for n in app._notifications]


# ---------------------------------------------------------------- cutting by importance
async def test_mountpoints_stay_whole_at_80x24_and_health_keeps_its_glyph():
    app = dashboard_app()
    async with app.run_test(size=SMALL) as pilot:
        app.advance(100)
        await pilot.pause()
        model = app.shown.model
        shown = screen_text(app).splitlines()
        at = next(i for i, line in enumerate(shown) if line.lstrip(" >").startswith("Device"))
        rows = [line for line in shown[at + 1:] if line[1:].split(" ", 1)[0] in model.devices]
        assert len(rows) >= 4
        for row in rows:
            name = row[1:].split()[0]
            mounts = ",".join(model.devices[name].mountpoints) or "-"
            # the mountpoint whole (sdb's /datasets was /dat…), after the health glyph
            assert row.endswith("  " + mounts), row
            assert row.split()[-2] in ("✓", "!", "✗", "?", "—"), row
            assert "…" not in row, row


async def test_header_flags_stay_whole_at_80x24_and_bang_shows_the_fix():
    every = [NO_SYSFS, PID_NAMESPACE, NOT_ROOT, NO_PSI]
    app = dashboard_app(origin=dataclasses.replace(ORIGIN, blind_spots=tuple(every)))
    async with app.run_test(size=SMALL) as pilot:
        app.advance(30)
        await pilot.press("a")          # ALL DEVICES too: five flags and DEMO
        await pilot.pause()
        head = screen_text(app).splitlines()[0]
        assert len(head) <= 80
        for flag in ["DEMO", *(BLIND_SPOT_FLAGS[k] for k in every)]:
            assert f" {flag} " in head or f" {SHORT_WORD.get(flag)} " in head, head
        assert " ALL DEVICES " in head or " ALL " in head, head
        assert head.rstrip().endswith("!"), head         # the key to what they hide
        assert "00:00:30" in head                         # the clock is kept too
        await pilot.press("exclamation_mark")
        assert isinstance(app.screen, HiddenScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HiddenScreen)


async def test_bang_shows_what_once_prints_for_a_blind_spot(tmp_path):
    """Real collectors with no /sys (as `docker run` without -v /sys): the header says
    NO /sys and `!` shows --once's own warning line for it, its fix included."""
    roots = Roots(sysfs=str(tmp_path))                       # an empty /sys
    sampler = Sampler(roots, gpu=GpuCollector(nvml=FakeNvml()))
    origin = Source(LIVE, "node", LIVE, kernel="6.1",
                    blind_spots=tuple(b.key for b in sampler.blind_spots))
    app = dashboard_app(sampler, origin=origin)
    try:
        async with app.run_test(size=SMALL) as pilot:
            app.advance(2)
            await pilot.pause()
            assert " NO /sys " in screen_text(app).splitlines()[0]
            once = render_text(app.shown.model, DeviceFilter(), origin)
            wanted = [line for line in once.splitlines()
                      if line.startswith("warning: ") and "fix: " in line and str(tmp_path) in line]
            assert wanted, once
            await pilot.press("exclamation_mark")
            await pilot.pause()
            assert isinstance(app.screen, HiddenScreen)
            for line in wanted:
                assert line in app.screen.text, app.screen.text
    finally:
        sampler.close()


async def test_the_timeline_title_cuts_whole_words_at_80x24():
    app = dashboard_app()
    async with app.run_test(size=SMALL) as pilot:
        app.advance(100)
        await pilot.pause()
        title = text_of(app.query_one(Timeline)).splitlines()[0]
        assert "undia" not in title or "undiagnosed" in title, title
        assert "D C K S ?" in title and title.endswith(" of 18")     # rows hidden: said
        await pilot.press("tab", "tab", "tab")                     # the timeline
        for _ in range(2):
            await pilot.press("left")
        await pilot.press("m")
        await pilot.pause()
        title = text_of(app.query_one(Timeline)).splitlines()[0]
        # the metric, the time it shows and the way back to now are kept
        assert "r_await ms log scale (m)" in title and "10 back (End)" in title, title


async def test_the_host_line_keeps_its_mem_label_when_it_wraps():
    app = dashboard_app()
    async with app.run_test(size=SMALL) as pilot:
        app.advance(10)
        await pilot.pause()
        lines = [line for line in screen_text(app).splitlines() if "cache " in line]
        assert lines and lines[0].lstrip().startswith("MEM cache "), lines


@pytest.mark.root(reason="puts a reader in a cgroup of its own")
async def test_the_command_is_kept_over_its_cgroup_id(tmp_path):
    """A real reader (fio, O_DIRECT on this machine's disk, a long command line) in a
    container-like cgroup: at 80 columns the I/O view keeps its command and cuts the
    cgroup id; at 200 both show whole."""
    if shutil.which("fio") is None:
        pytest.skip("fio is not installed (Debian: fio)")
    mount = next((line.split(" - ")[0].split()[4] for line in open("/proc/self/mountinfo")
                  if line.split(" - ")[1].startswith("cgroup2 ")), None)
    if mount is None:
        pytest.skip("no cgroup v2 hierarchy here")
    scope = os.path.join(mount, f"docker-{secrets.token_hex(32)}.scope")
    try:
        os.mkdir(scope)
    except OSError as err:
        pytest.skip(f"cannot make a cgroup: {err}")
    data = realdisk.random_file(os.path.join(realdisk.BASE, f"gdt-narrow-{os.getpid()}.img"), 64)

    def enter() -> None:
        with open(os.path.join(scope, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))

    # a modest rate: the machine is shared
    fio = subprocess.Popen(["fio", "--name=narrow-reader", f"--filename={data}", "--readonly",
                            "--thread",                  # its reads are its own process's
                            "--rw=randread", "--bs=4k", "--direct=1", "--rate_iops=300",
                            "--time_based", "--runtime=120"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=enter)
    sampler = Sampler(Roots(), gpu=GpuCollector(nvml=FakeNvml()))
    app = dashboard_app(sampler, origin=Source(LIVE, "node", LIVE, kernel="k"))
    try:
        async with app.run_test(size=SMALL) as pilot:
            await pilot.press("i")
            row = None
            deadline = time.monotonic() + 90
            while row is None and time.monotonic() < deadline:
                app.advance(1)
                await pilot.pause()
                row = next((line for line in text_of(app.query_one(IoProcPanel)).splitlines()
                            if line[1:].split()[:1] == [str(fio.pid)]), None)
                if row is None:
                    await asyncio.sleep(1.0)
            assert row is not None, text_of(app.query_one(IoProcPanel))
            # its command, not its container id, fills the row's end
            assert "fio --name=narrow-r" in row, row
            assert "docker" not in row and len(row) <= 80, row
            await pilot.resize_terminal(200, 60)
            await pilot.pause()
            row = next(line for line in text_of(app.query_one(IoProcPanel)).splitlines()
                       if line[1:].split()[:1] == [str(fio.pid)])
            container = "docker " + os.path.basename(scope)[len("docker-"):][:12]
            assert container in row and f"--filename={data}" in row, row
    finally:
        fio.kill()
        fio.wait()
        sampler.close()
        os.unlink(data)
        for _ in range(50):
            try:
                os.rmdir(scope)
                break
            except OSError:
                time.sleep(0.1)


# ---------------------------------------------------------------- small things
@pytest.mark.parametrize("key", ["h", "f1", "question_mark"])
async def test_h_and_f1_open_help_as_question_mark_does(key):
    app = dashboard_app()
    async with app.run_test(size=SMALL) as pilot:
        app.advance(3)
        await pilot.press(key)
        assert isinstance(app.screen, HelpScreen)
        await pilot.press(key)                     # the same key closes it
        assert not isinstance(app.screen, HelpScreen)


async def test_f10_quits():
    app = dashboard_app()
    async with app.run_test(size=SMALL) as pilot:
        app.advance(3)
        await pilot.press("f10")
        await pilot.pause()
    assert app.return_code == 0 and not app.is_running


async def test_record_shows_rec_in_the_header(tmp_path):
    """As `gpudisk-top --record FILE` builds it (commands/dashboard.py): the recorder
    takes each sample, and the header says REC while it does."""
    path = str(tmp_path / "run.gdtrec")
    recorder = Recorder(path, make_header(ORIGIN, 1.0))
    app = dashboard_app(on_sample=recorder.append, record_path=path)
    try:
        async with app.run_test(size=SMALL) as pilot:
            app.advance(5)
            await pilot.pause()
            assert {"REC", "DEMO"} <= set(header_flags(app)), header_flags(app)
    finally:
        recorder.close("test")
    assert len(Recording.open(path)) == 5                  # REC meant it
    plain = dashboard_app()
    async with plain.run_test(size=SMALL) as pilot:
        plain.advance(5)
        await pilot.pause()
        assert "REC" not in header_flags(plain)


async def test_a_filter_and_all_devices_leave_a_trace_on_screen():
    app = dashboard_app()
    async with app.run_test(size=SMALL) as pilot:
        app.advance(20)
        await pilot.pause()
        assert header_flags(app)[1:] == ["DEMO"], header_flags(app)
        await pilot.press("slash", *"sd*", "enter")
        await pilot.pause()
        assert header_flags(app)[1:] == ["DEMO", "FILTER: sd*"], header_flags(app)
        await pilot.press("a")
        await pilot.pause()
        assert header_flags(app)[1:] == ["DEMO", "FILTER: sd*", "ALL DEVICES"], header_flags(app)
        await pilot.press("slash", "ctrl+u", "enter")       # cleared
        await pilot.press("a")
        await pilot.pause()
        assert header_flags(app)[1:] == ["DEMO"], header_flags(app)


async def test_a_filter_from_the_command_line_shows_too():
    app = dashboard_app(dev_filter=DeviceFilter.from_option(False, "nvme*"))
    async with app.run_test(size=SMALL) as pilot:
        app.advance(5)
        await pilot.pause()
        assert "FILTER: nvme*" in header_flags(app)


async def test_the_device_detail_has_the_header_and_a_footer_to_go_back():
    app = dashboard_app()
    async with app.run_test(size=SMALL) as pilot:
        app.advance(100)
        await pilot.press("tab", "enter")          # the disks' cursor, sdb: its detail
        await pilot.pause()
        assert isinstance(app.screen, DeviceScreen)
        lines = screen_text(app).splitlines()
        assert lines[0].startswith("gpudisk-top demo-node") and " DEMO" in lines[0], lines[0]
        assert "esc Back" in lines[-1], lines[-1]
        assert app.screen.query_one(DeviceDetail)._lines[0][0][0].strip() == "sdb"
        app.advance(1)                             # kept live: the next sample's clock
        await pilot.pause()
        assert "00:01:41" in header_flags(app)[0], header_flags(app)
        await pilot.press("escape")
        assert not isinstance(app.screen, DeviceScreen)


async def test_toasts_say_the_columns_as_the_screen_names_them():
    app = dashboard_app()
    async with app.run_test(size=(120, 40)) as pilot:
        app.advance(20)
        await pilot.press("m")
        await pilot.pause()
        assert f"timeline disk rows: {TIMELINE['r_await_ms'].label}" in toasts(app)
        await pilot.press("s")
        await pilot.pause()
        assert f"disks sorted by {DISK['r_await_ms'].label}" in toasts(app)
        for _ in range(4):
            await pilot.press("s")
        await pilot.pause()
        assert f"disks sorted by {TIMELINE['util_pct'].label}" in toasts(app)
        assert not any("_pct" in t or "_ms" in t for t in toasts(app)), toasts(app)


async def test_sorting_by_name_marks_the_device_column():
    app = dashboard_app()
    async with app.run_test(size=SMALL) as pilot:
        app.advance(20)
        for _ in range(4):
            await pilot.press("s")
        await pilot.pause()
        panel = app.query_one(DiskPanel)
        assert panel.sort == "name"
        head = text_of(panel).splitlines()[0]
        assert head[1:].startswith("▼Device") and "▼%util" not in head, head


# ---------------------------------------------------------------- --once, report
def test_once_d_filters_the_health_table_too():
    def run(*args) -> str:
        proc = subprocess.run(["gpudisk-top", "--demo", "--once", "-i", "1", *args],
                              capture_output=True, text=True, timeout=120,
                              env=dict(os.environ, PATH=os.path.dirname(sys.executable)
                                       + os.pathsep + os.environ["PATH"]))
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    def health_rows(text: str) -> list[str]:
        lines = text.splitlines()
        at = next(i for i, line in enumerate(lines) if line.split()[:2] == ["Device", "health"])
        rows = []
        for line in lines[at + 1:]:
            if not line.strip():
                break
            rows.append(line.split()[0])
        return rows

    every = health_rows(run())
    assert {"sdb", "sde", "nvme0n1"} <= set(every)
    assert health_rows(run("-d", "sdb1")) == ["sdb"]          # a partition: its disk's
    assert health_rows(run("-d", "sde,nvme0n1")) == ["nvme0n1", "sde"]
    # and the JSON's health[], as its disks[]
    out = json.loads(run("--json", "-d", "sdb1"))
    assert [d["name"] for d in out["disks"]] == ["sdb1"]
    assert [h["device"] for h in out["health"]] == ["sdb"]


def test_report_says_a_virtual_disks_class_whole():
    proc = subprocess.run([sys.executable, "-m", "gpudisk_top", "report",
                           os.path.join(os.path.dirname(os.path.dirname(__file__)),
                                        "examples", "demo-simulated.gdtrec")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines()]
    vdb = next(r for r in rows if r[:1] == ["vdb"] and len(r) > 2)
    assert vdb[1] == "virt", vdb                              # was "virtu"
