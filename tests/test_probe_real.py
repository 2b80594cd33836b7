"""`probe` on this machine's real disk: a loop device over a file in /var/tmp, whose reads
are capped for the probe's cgroup (cgroup v1 blkio.throttle.read_iops_device, or v2
io.max), so the right answer is known however busy the shared machine is: the QD32
figure must be the cap.  Both engines; the result kept and read back by identity;
nothing written to the device or its backing file; refusals as a user who is not root;
SIGTERM and SIGINT stop the reads and leave no fio behind, nor does SIGKILL.  A stored
ceiling below what the disk does under a real job (issue 35) is said ignored by
`--once --json`'s verdict; an honest one is used.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from gpudisk_top.probe import store
import realdisk
from slack import slack

pytestmark = [pytest.mark.integration,
              pytest.mark.root(reason="a loop device, and running as another user, need root")]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = "import sys; from gpudisk_top.cli import main; sys.exit(main(sys.argv[1:]))"
CAP_IOPS = 5000
BACKING_MIB = 320     # above the 256 MiB that random reads need
PROBE_S = 4.5         # 1.5 s for each test
NOBODY = 65534


@pytest.fixture(scope="module")
def loop():
    """(device node, kernel name, backing file) of a loop device with direct I/O, over
    BACKING_MIB of random data on the real disk."""
    with realdisk.loop_device(BACKING_MIB, "probe") as (dev, path):
        yield dev, os.path.basename(dev), path


def _writes(name: str) -> tuple[int, int]:
    """(writes completed, sectors written) of a device since boot."""
    with open(f"/sys/block/{name}/stat") as f:
        fields = f.read().split()
    return int(fields[4]), int(fields[6])


def _reads(name: str) -> int:
    with open(f"/sys/block/{name}/stat") as f:
        return int(f.read().split()[0])


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def _probe_capped(dev: str, name: str, engine: str, state: str) -> subprocess.CompletedProcess:
    cap = realdisk.IopsCap.for_disk_of(dev, CAP_IOPS)
    try:
        return subprocess.run(
            [sys.executable, "-c", CLI, "probe", dev, "--engine", engine, "--json",
             "--seconds", str(PROBE_S)],
            capture_output=True, text=True, timeout=PROBE_S + 60, cwd=ROOT,
            env=dict(os.environ, XDG_STATE_HOME=state),
            preexec_fn=cap.enter_self)   # fio inherits the cgroup
    finally:
        cap.remove()


JSON_KEYS = {"device", "identity", "identity_weak", "model", "argument", "target",
             "target_kind", "span_bytes", "engine", "seconds", "measured_at",
             "measured_at_s", "tests", "ceiling", "notes", "stored"}
TEST_KEYS = {"engine", "seconds", "ios", "iops", "read_mib_s", "lat_mean_ms", "lat_p99_ms"}


def _check_capped_probe(loop, engine: str, tmp_path) -> dict:
    dev, name, _backing = loop
    state = str(tmp_path / "state")
    before = _writes(name)
    proc = _probe_capped(dev, name, engine, state)
    assert proc.returncode == 0, proc.stderr
    assert _writes(name) == before, "the probe wrote to the device"
    assert "loads " + name in proc.stderr   # the warning before it starts
    doc = json.loads(proc.stdout)
    assert set(doc) == JSON_KEYS
    assert set(doc["tests"]) == {"randread_4k_qd1", "randread_4k_qd32", "read_1m_qd8"}
    for t in doc["tests"].values():
        assert set(t) == TEST_KEYS and t["engine"] == engine and t["ios"] > 0
    qd32 = doc["tests"]["randread_4k_qd32"]
    print(f"{engine}: QD32 {qd32['iops']:.0f} IOPS against a cap of {CAP_IOPS}; "
          f"QD1 {doc['tests']['randread_4k_qd1']['iops']:.0f}")
    assert qd32["iops"] == pytest.approx(CAP_IOPS, rel=0.10)
    assert doc["tests"]["randread_4k_qd1"]["iops"] <= CAP_IOPS * 1.1
    assert qd32["read_mib_s"] == pytest.approx(qd32["iops"] * 4096 / 2**20, rel=0.01)
    assert doc["ceiling"]["randread_qd32_iops"] == pytest.approx(qd32["iops"], abs=0.1)
    assert (doc["device"], doc["target"], doc["target_kind"]) == (name, dev, "device")
    assert doc["span_bytes"] == BACKING_MIB * 2**20
    # a loop device has no WWN or serial: its key is weak, and says so
    assert doc["identity"] == f"name:{name}" and doc["identity_weak"] is True
    stored = os.path.join(state, "gpudisk-top", "probes.json")
    assert doc["stored"] == stored
    ceilings = store.load_ceilings([name], path=stored)
    assert ceilings[name].randread_qd32_iops == doc["ceiling"]["randread_qd32_iops"]
    assert ceilings[name].engine == engine and ceilings[name].device == name
    return doc


def test_fio_engine_measures_the_cap_and_writes_nothing(loop, tmp_path):
    if shutil.which("fio") is None:
        pytest.skip("fio is not installed")
    digest = _sha256(loop[2])
    mtime_ns = os.stat(loop[2]).st_mtime_ns
    _check_capped_probe(loop, "fio", tmp_path)
    assert os.stat(loop[2]).st_mtime_ns == mtime_ns
    assert _sha256(loop[2]) == digest, "the backing file changed"


def test_builtin_engine_measures_the_cap(loop, tmp_path):
    _check_capped_probe(loop, "builtin", tmp_path)


# The interpreter may live where another user cannot reach it (/root/.pyenv), so the
# child starts as root, imports everything the probe command needs, and then gives up
# root for good (setuid, not seteuid) before main() runs.
AS_NOBODY = f"""
import importlib, os, pkgutil, sys
import gpudisk_top.cli, gpudisk_top.commands.probe, gpudisk_top.probe as p
for m in pkgutil.walk_packages(p.__path__, 'gpudisk_top.probe.'):
    importlib.import_module(m.name)
import argparse, errno, fcntl, json, math, mmap, random, signal, stat, threading
os.setgroups([]); os.setgid({NOBODY}); os.setuid({NOBODY})
sys.exit(gpudisk_top.cli.main(sys.argv[1:]))
"""


def _gdt_as_nobody(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", AS_NOBODY, "probe", *args, "--no-save"],
                          capture_output=True, text=True, timeout=60, cwd="/")


def test_a_device_node_is_refused_to_a_user_who_may_not_read_it():
    # a loop device of its own, 1 MiB: the refusal comes before any read, and the module's
    # 320 MiB of random data took 4 s of the fast lane, writing the disk the others read
    with realdisk.loop_device(1, "refused") as (dev, _):
        proc = _gdt_as_nobody(dev)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"gpudisk-top: error: cannot read {dev}: permission denied (reading a device "
        "node needs root or the disk group; or give a file of 256 MiB or more on it)"]


def test_a_directory_without_a_large_file_is_refused_when_the_device_is_unreadable():
    directory = tempfile.mkdtemp(prefix="gdt-probe-dir-", dir="/var/tmp")
    try:
        os.chmod(directory, 0o755)
        with open(os.path.join(directory, "small.bin"), "wb") as f:
            f.write(b"x" * 65536)
        os.chmod(os.path.join(directory, "small.bin"), 0o644)
        proc = _gdt_as_nobody(directory)
    finally:
        shutil.rmtree(directory)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"gpudisk-top: error: no file of 256 MiB or more under {directory}, and the device ")
    assert "not readable here" in lines[0] and proc.stdout == ""


def _readers_of(path: str) -> list[int]:
    """PIDs of fio processes reading `path`."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"fio") and f"--filename={path}".encode() in argv:
            out.append(int(pid))
    return out


@pytest.mark.parametrize("engine,signo", [("fio", signal.SIGTERM), ("builtin", signal.SIGINT)])
def test_a_signal_stops_the_probe_at_once_and_leaves_no_reader(loop, tmp_path, engine, signo):
    if engine == "fio" and shutil.which("fio") is None:
        pytest.skip("fio is not installed")
    dev, name, _backing = loop
    # SIGINT at its default in the probe, as in a terminal: a test run started in the
    # background by a shell without job control inherits it ignored (and so would the
    # probe: an ignored SIGINT is kept ignored, as nohup's is)
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI, "probe", dev, "--engine", engine, "--seconds", "60"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env=dict(os.environ, XDG_STATE_HOME=str(tmp_path / "state")),
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        reads = _reads(name)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and _reads(name) < reads + 1000:
            time.sleep(0.1)   # until the reads are under way
        assert _reads(name) >= reads + 1000, "the probe did not start reading"
        sent = time.monotonic()
        proc.send_signal(signo)
        out, err = proc.communicate(timeout=10)
        stopped_s = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert stopped_s < 5 * slack(), f"took {stopped_s:.1f} s to stop"
    assert "Traceback" not in err and out == ""
    assert _readers_of(dev) == []
    assert not (tmp_path / "state").exists()   # an interrupted probe keeps nothing



def test_fio_dies_with_a_probe_killed_with_sigkill(loop, tmp_path):
    """issue 35: `kill -9` of probe left fio reading the device for the rest of its
    runtime (fio's job was a process of its own, in a session of its own)."""
    if shutil.which("fio") is None:
        pytest.skip("fio is not installed")
    dev, name, _backing = loop
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI, "probe", dev, "--engine", "fio", "--seconds", "60"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env=dict(os.environ, XDG_STATE_HOME=str(tmp_path / "state")))
    readers: list[int] = []
    try:
        reads = _reads(name)
        deadline = time.monotonic() + 15 * slack()
        while time.monotonic() < deadline and _reads(name) < reads + 1000:
            time.sleep(0.1)   # until the reads are under way
        readers = _readers_of(dev)
        assert readers, "fio is not reading the device"
        proc.kill()           # SIGKILL to probe alone: nothing of ours can run after it
        proc.wait(10)
        deadline = time.monotonic() + 3 * slack()
        while time.monotonic() < deadline and _readers_of(dev):
            time.sleep(0.05)
        left = _readers_of(dev)
        assert left == [], f"fio {left} still reads {dev} after probe was killed"
        reads = _reads(name)
        time.sleep(0.5)
        assert _reads(name) == reads, "the device is still being read"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in set(readers) | set(_readers_of(dev)):   # ours: never left behind
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


# ---------------------------------------------------------------------------- doubted
def _once_on_a_job(tmp_path, ceiling: dict) -> dict:
    """`--once --json` on a real job starved by the real disk under its file (2 workers
    reading 4 KiB blocks with O_DIRECT, tests/jobs/loader_job.py; a stand-in GPU follows
    its progress), with `ceiling` stored as that disk's probe."""
    import standin
    from gpudisk_top.collect.roots import Roots
    from gpudisk_top.probe.target import describe_devices, identity

    data = realdisk.random_file(str(tmp_path / "data.bin"), 256)
    disk = realdisk.whole_disk(data)
    roots = Roots()
    key = identity(roots, describe_devices(roots), disk)[0]
    state = tmp_path / "state" / "gpudisk-top"
    state.mkdir(parents=True, exist_ok=True)
    entry = {"device": disk, "identity": key, "identity_weak": False, "engine": "fio",
             "target_kind": "file", "measured_at_s": 1.7e9, "tests": {}, "ceiling": ceiling}
    (state / "probes.json").write_text(json.dumps(
        {"format": "gpudisk-top probes", "version": 1, "devices": {key: entry}}))
    progress = str(tmp_path / "progress")
    job = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "jobs", "loader_job.py"),
                            "disk", "--workers", "2", "--seconds", "40", "--data", data,
                            "--progress", progress,
                            "--reads", str(realdisk.starving_reads(data, 2, 128))])
    try:
        time.sleep(4)        # the workers reading, the trainer's progress written
        cmd, env = standin.command(["--once", "--json", "-i", "2"], gpus=1,
                                   processes={0: [job.pid]}, progress=progress,
                                   healthy_steps_s=50.0)
        once = subprocess.run(cmd, env=dict(env, XDG_STATE_HOME=str(tmp_path / "state")),
                              capture_output=True, text=True, timeout=120, cwd=ROOT)
    finally:
        job.kill()
        job.wait()
    assert once.returncode == 0 and "Traceback" not in once.stderr, once.stderr
    doc = json.loads(once.stdout)
    doc["disk"] = disk
    return doc


def _texts(verdict: dict) -> str:
    return " | ".join([verdict["reason"]] + [f"{w['basis']} {w['cap']}"
                                              for w in verdict["whatif"]])


def test_a_stored_ceiling_below_what_the_loaded_disk_does_is_said_ignored(tmp_path):
    """issue 35: `randread_qd32_iops: 1` gave 'capped by the device: 0k r/s' and '2886118%
    of its ceiling' while the disk did 28,000 r/s in the same output."""
    doc = _once_on_a_job(tmp_path, {"randread_qd32_iops": 1.0, "randread_qd1_iops": 20000.0,
                                    "seq_read_mib_s": 3000.0})
    v, disk = doc["verdict"], doc["disk"]
    r_s = next(d["r_s"] for d in doc["disks"] if d["name"] == disk)
    assert v["state"] == "disk-starved" and r_s > 2, json.dumps(v)
    text = _texts(v)
    assert (f"probe of {disk} ignored: " in text
            and "r/s read, above twice its stored QD32 ceiling of 1 r/s" in text), text
    for used in ("(probe)", "from the probe", "(the probe's", "r/s at QD32"):
        assert used not in text, text
    for w in v["whatif"]:
        if "latency taken as flat" in w["basis"]:
            assert f"probe of {disk} ignored" in w["basis"], w


def test_an_honest_stored_ceiling_of_the_loaded_disk_is_used(tmp_path):
    """The control: a probe above what 2 synchronous readers get (this VM's disk: QD1 17k,
    QD32 80k random reads a second) is the evidence's ceiling, never doubted."""
    doc = _once_on_a_job(tmp_path, {"randread_qd32_iops": 200000.0,
                                    "randread_qd1_iops": 20000.0, "seq_read_mib_s": 3000.0})
    v = doc["verdict"]
    assert v["state"] == "disk-starved", json.dumps(v)
    text = _texts(v)
    assert "ignored" not in text, text
    if v["kind"] == "latency-bound":
        assert "of its 200000 at queue depth 32 (probe)" in v["reason"], v["reason"]
