"""The load and the page cache state tests/whatif_harness.py's scenarios set beside a job,
and how a fix done for real stops that load: busy loops (other users' CPU work), a
neighbour's reads of the job's device (fio's 4 KiB random O_DIRECT reads at a queue
depth), and a data file kept out of the page cache.  Each load is a process group of its
own (its own session), so stopping it (SIGSTOP to the group) stops it whole and never a
process this harness did not start."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading

FIO = shutil.which("fio")
NEIGHBOUR_S = 600       # fio's run: longer than any scenario (killed at its end)


def busy_loops(n: int, nice: int = 0) -> list[subprocess.Popen]:
    """Other users' work: busy loops, each in a session of its own, at `nice`."""
    return [subprocess.Popen([sys.executable, "-c", f"import os; os.nice({nice})\n"
                              "while True: pass"],
                             start_new_session=True, stdin=subprocess.DEVNULL)
            for _ in range(n)]


def neighbour_reads(data: str, qd: int) -> list[subprocess.Popen]:
    """A neighbour reading the job's device: fio's 4 KiB random O_DIRECT reads of `data`
    at queue depth `qd` (libaio, one process: --thread), in a session of its own; none
    for qd 0.  Raises RuntimeError where fio is not installed."""
    if not qd:
        return []
    if FIO is None:
        raise RuntimeError("fio is not installed: the neighbour scenario needs it")
    argv = [FIO, "--name=neighbour", f"--filename={data}", "--readonly", "--rw=randread",
            "--bs=4k", "--direct=1", "--ioengine=libaio", f"--iodepth={qd}", "--thread",
            "--time_based", f"--runtime={NEIGHBOUR_S}", "--output=/dev/null"]
    return [subprocess.Popen(argv, start_new_session=True, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL)]


def group_pids(procs: list[subprocess.Popen]) -> dict[int, subprocess.Popen]:
    """Every live process in the process groups of `procs` (their own sessions), by pid:
    a load's threads' and children's pids are the ones gpudisk-top may name."""
    groups = {p.pid: p for p in procs if p.poll() is None}
    out: dict[int, subprocess.Popen] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                pgid = os.getpgid(int(name))
            except OSError:
                continue
            if pgid in groups:
                out[int(name)] = groups[pgid]
    return out


def signal_load(proc: subprocess.Popen, sig: int) -> None:
    """`sig` to a load's process group, while it is alive."""
    if proc.poll() is None:
        os.killpg(proc.pid, sig)


def stop_pids(pids, whole: bool) -> None:
    """SIGSTOP to each of `pids` (the loads' own, from group_pids), or to each one's
    process group where `whole`; one that has exited meanwhile is passed over."""
    for pid in pids:
        try:
            (os.killpg if whole else os.kill)(pid, signal.SIGSTOP)
        except ProcessLookupError:
            pass


def end_load(proc: subprocess.Popen) -> None:
    """A load ended: resumed, killed, reaped."""
    signal_load(proc, signal.SIGCONT)
    signal_load(proc, signal.SIGKILL)
    proc.wait()


class ColdCache:
    """Keeps `path` out of the page cache while on (DONTNEED every 0.2 s)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.on = threading.Event()
        self.done = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def drop(self) -> None:
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)

    def _run(self) -> None:
        while not self.done.wait(0.2):
            if self.on.is_set():
                self.drop()

    def cold(self) -> None:
        self.drop()
        self.on.set()

    def warm(self) -> None:
        self.on.clear()
        with open(self.path, "rb") as f:
            while f.read(8 << 20):
                pass

    def close(self) -> None:
        self.done.set()
        self.on.clear()
