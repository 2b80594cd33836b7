"""One probe test through fio: libaio, O_DIRECT, --readonly, JSON output.

fio is started in a session of its own, so a Ctrl-C at the terminal reaches only us; we
then stop fio ourselves (SIGTERM, then SIGKILL) and never leave it running.  A fio that
outlives its --runtime by FIO_GRACE_S is killed: a hung device must not hang the probe.
Nor does fio outlive us when we cannot stop it (SIGKILL, the OOM killer): it asks the
kernel for SIGKILL when we die (prctl PR_SET_PDEATHSIG, set in the child before exec),
and runs its job as a thread (--thread), not as a process of its own that the signal
would miss (a forked child does not inherit the death signal).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import shutil
import signal
import subprocess

from gpudisk_top.errors import RuntimeFailure
from gpudisk_top.probe.spec import TestResult, TestSpec

FIO_GRACE_S = 15.0    # fio's start (it reads the device size, sets up libaio) and exit


def available() -> str | None:
    """The fio executable's path, or None when it is not installed."""
    return shutil.which("fio")


def command(spec: TestSpec, path: str, span_bytes: int, seconds: float,
            ramp_s: float = 0.0, start_bytes: int = 0, fio: str = "fio") -> list[str]:
    return [
        fio, "--name=gpudisk-top-probe",
        # fio splits --filename at ':' (several files); a path's own colons are escaped
        "--filename=" + path.replace("\\", "\\\\").replace(":", "\\:"),
        # never write, never create or extend a file, never flush the device's cache
        # (invalidate=1 would call BLKFLSBUF on a device node, which syncs its buffers)
        "--readonly", "--allow_file_create=0", "--invalidate=0",
        "--direct=1", "--ioengine=libaio", f"--rw={spec.rw}", f"--bs={spec.block_bytes}",
        f"--iodepth={spec.queue_depth}",
        f"--offset={start_bytes}", f"--size={span_bytes - start_bytes}",
        "--time_based", f"--runtime={max(1, round(seconds * 1000))}ms",
        f"--ramp_time={round(ramp_s * 1000)}ms",
        "--norandommap", "--randrepeat=0", "--lat_percentiles=1",
        "--output-format=json", "--eta=never",
        # the job in fio's own process: the death signal (_die_with_parent) reaches it
        "--thread",
    ]


PR_SET_PDEATHSIG = 1   # <linux/prctl.h>
_libc = None


def _prctl():
    """libc's prctl, loaded in the parent: the child between fork and exec must not load
    a library (another thread may hold the loader's lock at the fork)."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    return _libc.prctl


def _die_with_parent(parent_pid: int, prctl) -> None:
    """In the child before exec: SIGKILL when the parent dies.  The kernel sends it when
    the *thread* that forked exits; run() waits for fio on that very thread, so it fires
    only when the whole process goes.  A parent that died before the prctl is seen by
    getppid() (the child was reparented): exit at once."""
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:
        os._exit(1)


def run(spec: TestSpec, path: str, span_bytes: int, seconds: float,
        ramp_s: float = 0.0, start_bytes: int = 0, fio: str = "fio") -> TestResult:
    """Run one test for `ramp_s` unmeasured, then `seconds` measured; reads fall in
    [start_bytes, span_bytes).  Raises
    RuntimeFailure when fio fails, says nothing we can read, or overruns;
    KeyboardInterrupt passes through once fio is stopped."""
    parent, prctl = os.getpid(), _prctl()
    proc = subprocess.Popen(command(spec, path, span_bytes, seconds, ramp_s, start_bytes, fio),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=lambda: _die_with_parent(parent, prctl))
    try:
        out, err = proc.communicate(timeout=ramp_s + seconds + FIO_GRACE_S)
    except subprocess.TimeoutExpired:
        _stop(proc)
        raise RuntimeFailure(f"fio did not finish within {ramp_s + seconds + FIO_GRACE_S:.0f} s "
                             f"reading {path}: the device may be hung") from None
    except BaseException:
        _stop(proc)
        raise
    if proc.returncode != 0:
        raise RuntimeFailure(f"fio failed (exit status {proc.returncode}) reading {path}: "
                             f"{_last_line(err) or _last_line(out) or 'no message'}")
    return parse(spec, out)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)   # fio stops its jobs and exits
        try:
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _last_line(text: str | None) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def parse(spec: TestSpec, out: str) -> TestResult:
    """A TestResult from fio's --output-format=json text (fio may print notes before
    the JSON object).  Raises RuntimeFailure when it holds no read figures."""
    try:
        doc = json.loads(out[out.index("{"):])
        job = doc["jobs"][0]
        read = job["read"]
        lat = read["lat_ns"]
        pct = lat.get("percentile") or read["clat_ns"].get("percentile") or {}
        p99_ns = float(pct.get("99.000000", lat["max"]))
        result = TestResult(
            name=spec.name, engine="fio", seconds=read["runtime"] / 1000.0,
            ios=int(read["total_ios"]), iops=float(read["iops"]),
            # from the reads completed, as the built-in counts them: fio's bw_bytes
            # also counts bytes of reads that were in flight at the end of the ramp
            read_mib_s=float(read["iops"]) * spec.block_bytes / 2**20,
            lat_mean_ms=float(lat["mean"]) / 1e6, lat_p99_ms=p99_ns / 1e6)
    except (ValueError, LookupError, TypeError) as err:
        raise RuntimeFailure(f"fio's output could not be read ({type(err).__name__}: {err}); "
                             "fio 3.0 or later is needed") from None
    if job.get("error"):
        raise RuntimeFailure(f"fio reported error {job['error']} reading the device")
    if result.ios == 0:
        raise RuntimeFailure("fio completed no reads")
    return result
