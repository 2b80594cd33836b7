"""Fault round (issue 9, items 8-10): hostile source files, paths and arguments give a
correct result or one clear line, never a hang, a flood or a raw escape sequence."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from cli_run import ROOT, gdt, gdt_argv
from fakeprocfs import FakeProcfs
from slack import slack


def diskstats_line(name: str, reads: int, ticks: int = 0, nfields: int = 20) -> str:
    counters = [reads, 0, reads * 8, ticks, 0, 0, 0, 0, 0, ticks, ticks, 0, 0, 0, 0, 0, 0]
    return " ".join(["8", "0", name, *map(str, counters[:nfields - 3])]) + "\n"


@pytest.fixture
def procfs(tmp_path):
    """A procfs directory of copies: the machine's stat (CPU), and a diskstats the test
    writes."""
    return FakeProcfs(tmp_path / "proc").copy("stat")


# ---------------------------------------------------------------------------- item 8
def read_since(path, atime_ns: int) -> bool:
    """Whether `path` was read since its atime was set to `atime_ns` (relatime updates an
    atime older than the mtime on the next read)."""
    return os.stat(path).st_atime_ns != atime_ns


def test_a_diskstats_replaced_by_rename_is_read_anew(procfs):
    """A file replaced by rename (as a collector that rewrites it atomically does) must be
    read from the new file: the old code kept the first one open and read 0 for ever."""
    path = procfs / "diskstats"
    path.write_text(diskstats_line("sdz", 1000))
    # the replacement comes once the first sample has read the file, not a second after
    # starting it: a busy machine took longer than that to start the interpreter, both
    # samples read the new file and the rate was 0
    os.utime(path, ns=(0, os.stat(path).st_mtime_ns))
    path.read_text()
    if not read_since(path, 0):
        pytest.skip(f"{path.parent} does not update atimes: a read cannot be seen")
    os.utime(path, ns=(0, os.stat(path).st_mtime_ns))
    proc = subprocess.Popen(gdt_argv("--once", "--json", "-i", "2", "--procfs", str(procfs),
                                     "-d", "sdz"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT)
    deadline = time.monotonic() + 60 * slack()
    while not read_since(path, 0) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    tmp = procfs / "diskstats.new"
    tmp.write_text(diskstats_line("sdz", 1000 + 600, ticks=600))
    os.replace(tmp, path)
    out, err = proc.communicate(timeout=60 * slack())
    assert proc.returncode == 0, err
    doc = json.loads(out)
    (disk,) = doc["disks"]
    # 600 reads over the interval the sample measured (2 s, longer on a busy machine)
    assert disk["name"] == "sdz" and disk["r_s"] == pytest.approx(600 / doc["interval_s"],
                                                                  rel=0.01)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "too-large"])
def test_a_source_that_would_block_or_flood_is_a_warning(procfs, kind):
    path = procfs / "diskstats"
    if kind == "fifo":
        os.mkfifo(path)                      # open() for reading would wait for a writer
        why = "not a regular file (a FIFO)"
    elif kind == "dev-zero":
        os.symlink("/dev/zero", path)        # read() would never end
        why = "not a regular file (a character device)"
    else:
        with open(path, "wb") as f:          # a sparse 17 MiB file
            f.truncate(17 * 2**20)
        why = "larger than 16 MiB"
    t0 = time.monotonic()
    proc = subprocess.Popen(gdt_argv("--once", "--json", "-i", "0.2",
                                     "--procfs", str(procfs)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT)
    peak_rss_kb = 0
    while proc.poll() is None and time.monotonic() - t0 < 20:
        try:
            with open(f"/proc/{proc.pid}/status") as f:
                rss = re.search(r"VmRSS:\s+(\d+)", f.read())
            peak_rss_kb = max(peak_rss_kb, int(rss.group(1)) if rss else 0)
        except OSError:
            pass
        time.sleep(0.05)
    if proc.poll() is None:
        proc.kill()
    out, err = proc.communicate()
    assert time.monotonic() - t0 < 20, "it hung"
    assert proc.returncode == 0, err
    assert f"cannot read {path}: {why}" in err or why in err, err
    assert json.loads(out)["disks"] == []
    assert peak_rss_kb < 200 * 1024, peak_rss_kb


@pytest.mark.parametrize("rel", ["self/cgroup", "self/mountinfo", "meminfo"])
def test_a_host_file_that_cannot_be_read_is_a_warning(procfs, rel):
    """Host files other than diskstats: the part they feed is left out, and said."""
    (procfs / "diskstats").write_text(diskstats_line("sdz", 1000))
    shutil.copy("/proc/self/cgroup", procfs / "cgroup-copy")
    (procfs / "self").mkdir()
    shutil.copy("/proc/self/mountinfo", procfs / "self" / "mountinfo")
    os.replace(procfs / "cgroup-copy", procfs / "self" / "cgroup")
    shutil.copy("/proc/meminfo", procfs / "meminfo")
    (procfs / "pressure").mkdir()            # PSI as the host has it: no warning of its own
    for name in ("io", "cpu", "memory"):
        (procfs / "pressure" / name).write_text("some avg10=0.00 avg60=0.00 avg300=0.00 total=1\n"
                                                "full avg10=0.00 avg60=0.00 avg300=0.00 total=1\n")
    (procfs / rel).unlink()
    (procfs / rel).mkdir()                   # there, but not a file anyone can read
    proc = gdt("--once", "--json", "-i", "0.2", "--procfs", str(procfs))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [
        f"gpudisk-top: warning: cannot read {procfs / rel}: not a regular file (a directory)"]
    doc = json.loads(proc.stdout)
    assert [d["name"] for d in doc["disks"]] == ["sdz"]


def test_escape_sequences_in_names_never_reach_the_terminal(procfs):
    evil = "sd\x1b]2;pwned\x07\x1b[2J"
    (procfs / "diskstats").write_text(diskstats_line(evil, 1000))
    proc = gdt("--once", "-a", "-i", "0.2", "--procfs", str(procfs))
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout
    assert "sd\\x1b]2;pwned\\x07\\x1b[2J" in proc.stdout
    as_json = gdt("--once", "--json", "-a", "-i", "0.2", "--procfs", str(procfs))
    assert evil in [d["name"] for d in json.loads(as_json.stdout)["disks"]]  # JSON escapes


# ---------------------------------------------------------------------------- item 9
@pytest.mark.root(reason="dropping to another user needs root")
def test_an_unreadable_default_config_path_is_a_warning_not_an_error(tmp_path):
    """`su` without `-`, or `docker exec -u 1000`: HOME is still /root, which this user
    cannot read.  The default config then cannot be known to exist: defaults and a
    warning, not "Permission denied" for every command."""
    code = ("import os, sys\n"
            "from gpudisk_top.cli import main\n"
            "main(['--once', '--demo', '--json', '-i', '0.1'])   # every import done as root\n"
            "os.setgroups([]); os.setgid(65534); os.setuid(65534)\n"
            "os.environ['HOME'] = '/root'; os.environ.pop('XDG_CONFIG_HOME', None)\n"
            "sys.exit(main(['--once', '--demo', '--json', '-i', '0.1']))\n")
    env = {k: v for k, v in os.environ.items() if k != "XDG_CONFIG_HOME"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr
    assert ("gpudisk-top: warning: cannot read the config file "
            "/root/.config/gpudisk-top/config.toml (Permission denied); using the default "
            "settings") in proc.stderr
    # and an explicit --config that cannot be read is still an error
    code2 = code.replace("sys.exit(main(['--once'", "sys.exit(main(['--config', "
                         "'/root/x.toml', '--once'")
    proc = subprocess.run([sys.executable, "-c", code2], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env=env)
    assert proc.returncode == 2 and "Permission denied" in proc.stderr


# ---------------------------------------------------------------------------- item 10
def test_a_config_nested_beyond_reason_is_one_line(tmp_path):
    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n")
    proc = gdt("--once", "--demo", "--config", str(deep))
    assert proc.returncode == 2
    assert proc.stderr == f"gpudisk-top: error: config: {deep}: not valid TOML: nested too deeply\n"


def test_a_full_stdout_is_one_line():
    with open("/dev/full", "w") as full:
        proc = subprocess.run(gdt_argv("--once", "--demo", "--json"),
                              stdout=full, stderr=subprocess.PIPE, text=True, timeout=30,
                              cwd=ROOT)
    assert proc.returncode == 1
    assert proc.stderr == ("gpudisk-top: error: cannot write to standard output: "
                           "No space left on device\n")


@pytest.mark.parametrize("url, why", [
    ("http://[::1", "Invalid IPv6 URL"),
    ("http://127.0.0.1:99999", "Port out of range"),
    ("http://127.0.0.1:0", "port 0 is not a port to push to"),
    ("ftp://gateway:9091", "give the Pushgateway's URL"),
])
def test_bad_push_urls_are_usage_errors(url, why):
    proc = gdt("serve", "--demo", "--push", url, "--no-listen", "--count", "1")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and why in proc.stderr, proc.stderr


def test_listening_beyond_loopback_is_said_and_the_backlog_takes_a_crowd():
    if shutil.which("ss") is None:
        pytest.skip("ss (iproute2) is not installed: the listen backlog cannot be read")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(gdt_argv("serve", "--demo", "-i", "0.2",
                                     "--listen", f"0.0.0.0:{port}"), stderr=subprocess.PIPE,
                            text=True, cwd=ROOT)
    try:
        first, second = proc.stderr.readline(), proc.stderr.readline()
        ss = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
    lines = first + second
    assert f"gpudisk-top: warning: --listen 0.0.0.0:{port}: every host that can reach" in lines
    assert ss.returncode == 0 and ss.stdout.strip(), ss.stderr
    # for a listening socket ss shows the backlog as Send-Q: 128 (or somaxconn if less),
    # not socketserver's 5, which made 20 scrapers at once wait a second for a retry
    with open("/proc/sys/net/core/somaxconn") as f:
        somaxconn = int(f.read())
    assert int(ss.stdout.split()[2]) == min(128, somaxconn)


# The demo node with and without its disks' simulated health (each part's first row
# carries every disk's reading).  A part's room is judged on the next row as it will be
# written (a row after a block carries every record, ~39 kB here; the others ~2 kB):
# when it was judged on the largest row so far, parts rotated after 7 rows at a fifth of
# their size and 1 MB kept 175 samples (79 with health), then 875 (735).  The demo's
# samples have grown since (b57c38b kept 719 (610)), and format 3 (issue 41) kept 652
# (559): under a 1 MB budget its blocks hold ~10 samples, where its predictions' header
# can cost more than they save.  A block of 64 samples or fewer is now written the smaller
# way, with or without them (record/v2/blocks.py PLAIN_TRY_ROWS): 677 (596); LZMA's preset
# 6 as it is (its binary-tree match finder, issue 41's third stop): 689 (608).
@pytest.mark.parametrize("health_interval_s, at_least", [(0.0, 660), (600.0, 580)])
def test_max_size_is_a_budget_not_a_hint(tmp_path, health_interval_s, at_least):
    from gpudisk_top.record import Recorder, Recording, make_header
    from gpudisk_top.sim import Simulator, builtin
    from recording_helpers import origin

    budget_bytes = 2**20
    sim = Simulator(builtin("demo"), seed=0, interval_s=1.0, health_interval_s=health_interval_s)
    rec = Recorder(tmp_path / "r.gdtrec", make_header(origin(), 1.0), max_size_mb=1,
                   sync_interval_s=None)
    peak = 0
    for _ in range(1800):   # about twice what the budget holds: parts rotate and drop
        rec.append(sim.sample())
        peak = max(peak, sum(p.stat().st_size for p in tmp_path.iterdir()))
    rec.close()
    assert peak <= budget_bytes, peak          # was 37 % over
    kept = 0
    for p in tmp_path.iterdir():
        with Recording.open(p) as r:
            assert r.warnings == []
            kept += len(r)
    # the demo node's samples in parts of 100 kB (each with its own header and
    # processes' table): a budget is not a reason to keep nothing
    assert kept > at_least
