"""The sample's caches are exact: what a warm Sampler reads equals what a cold read of
the same input gives, field by field (issue 27: a sample that costs what changed).

- Processes: real ones on this machine's /proc, a GPU job (a trainer and its workers)
  driven step by step: files opened and closed, a file mapped and unmapped, counters
  moved, a worker that exits and one that takes its PID.  After each step the warm
  Sampler's sample and a fresh ProcIoCollector (no cache at all) read the same quiet
  processes; every ProcIoRaw must be equal.  The warm one runs with devices_refresh_s 0
  (the cadence cap, an older rule than the cache: a change shows at the next scan due),
  so what is compared is the cache alone: a process whose fd count and vsize did not
  change is not scanned again, and a text read the same is not parsed again.
- Disks: scripted diskstats texts, with devices idle, moving, reset, appearing and
  vanishing, through the memo and the carry-over of unmoved devices and without them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

from gpudisk_top.collect import diskstats
from gpudisk_top.collect.jobid import JobIdentifier
from gpudisk_top.collect.procio import ProcIoCollector
from gpudisk_top.collect.roots import Roots
from gpudisk_top.collect.sampler import Sampler
from gpudisk_top.model.disk import _base, _deltas, _rates_of, checked_intervals, implausible
from gpudisk_top.model.snapshot import Model
from gpudisk_top.sim.fake_nvml import FakeNvml

# The job: a trainer that forks workers; each takes commands on its own pipe and answers
# on the trainer's, so a step ends with every process asleep in a read (quiet: its
# counters hold still while the two reads compare).
JOB = textwrap.dedent(r"""
    import ctypes, mmap, os, sys, time
    files = {}
    maps = {}

    def serve(rfd, ack):
        while True:
            line = b""
            while not line.endswith(b"\n"):
                line += os.read(rfd, 1)
            cmd, *arg = line.decode().split()
            if cmd == "open":
                files[arg[0]] = os.open(arg[1], os.O_RDONLY)
            elif cmd == "close":
                os.close(files.pop(arg[0]))
            elif cmd == "read":
                os.pread(files[arg[0]], 65536, 0)
            elif cmd == "map":                     # mapped, then its fd closed
                fd = os.open(arg[1], os.O_RDONLY)
                maps[arg[0]] = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
                os.close(fd)
            elif cmd == "unmap":
                maps.pop(arg[0]).close()
            elif cmd == "exit":
                os.write(ack, b"ok\n")
                os._exit(0)
            os.write(ack, b"ok\n")

    def fork_worker(first_file, pid_wanted=None):
        r, w = os.pipe()
        if pid_wanted is not None:
            with open("/proc/sys/kernel/ns_last_pid", "w") as f:
                f.write(str(pid_wanted - 1))
        pid = os.fork()
        if pid == 0:
            os.close(w)
            files["data"] = os.open(first_file, os.O_RDONLY)
            serve(r, ack_w)
        os.close(r)
        return pid, w

    ack_r, ack_w = os.pipe()
    workers = {}
    for i, path in enumerate(sys.argv[1:4]):
        workers[i] = fork_worker(path)
    print(" ".join(str(workers[i][0]) for i in sorted(workers)), flush=True)
    for line in sys.stdin:
        who, cmd = line.split(None, 1)
        if who == "reuse":                          # a new worker in PID `cmd`'s place
            want, path = cmd.split()
            time.sleep(0.05)                        # another start time
            for _ in range(50):
                pid, w = fork_worker(path, int(want))
                if pid == int(want):
                    break
                os.write(w, b"exit\n"); os.read(ack_r, 3); os.waitpid(pid, 0)
            workers[3] = (pid, w)
            print(pid, flush=True)
            continue
        i = int(who)
        os.write(workers[i][1], cmd.encode())
        os.read(ack_r, 3)
        if cmd.startswith("exit"):
            os.waitpid(workers[i][0], 0)
        print("ok", flush=True)
""")


class Job:
    def __init__(self, tmp_path) -> None:
        self.paths = []
        for mib in (1, 2, 3, 4, 5):
            path = tmp_path / f"data{mib}.bin"
            path.write_bytes(os.urandom(mib << 20))
            self.paths.append(str(path))
        self.proc = subprocess.Popen([sys.executable, "-c", JOB, *self.paths[:3]],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.workers = [int(x) for x in self.proc.stdout.readline().split()]

    def do(self, worker: int, cmd: str) -> None:
        self.proc.stdin.write(f"{worker} {cmd}\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "ok"

    def reuse(self, pid: int, path: str) -> int:
        self.proc.stdin.write(f"reuse {pid} {path}\n")
        self.proc.stdin.flush()
        return int(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        for pid in self.workers:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass


@pytest.mark.skipif(not os.path.exists("/proc/self/fd") or os.geteuid() != 0,
                    reason="needs Linux's /proc and root (a PID taken again: ns_last_pid)")
def test_warm_sampler_reads_what_a_cold_read_gives(tmp_path):
    job = Job(tmp_path)
    try:
        nvml = FakeNvml.with_gpus(1)
        nvml.set_state(0, util_pct=90.0, processes=[(job.proc.pid, 2**30)])
        sampler = Sampler(Roots(), nvml=nvml)
        sampler._procio.devices_refresh_s = 0.0   # the cache alone (see the docstring)
        gpu_pids = {job.proc.pid: job.proc.pid}
        scans = []
        real_devices = sampler._procio._devices

        def counted(pid, now):
            if pid == job.proc.pid or pid in job.workers:
                scans.append(pid)
            return real_devices(pid, now)
        sampler._procio._devices = counted

        def compare(step: str) -> dict:
            time.sleep(0.05)     # every process asleep in its read
            nvml.advance_to(time.time())
            warm = sampler.sample()
            cold = ProcIoCollector(Roots()).collect(gpu_pids)
            JobIdentifier(Roots()).tag_all(cold, gpu_pids)      # as the sampler's, afresh
            job_pids = {pid for pid, p in warm.procs.items() if p.root_pid is not None}
            assert job_pids == set(cold), step
            for pid in cold:
                assert warm.procs[pid] == cold[pid], (step, pid, warm.procs[pid], cold[pid])
            return cold

        w0, w1, w2 = job.workers
        first = compare("start")
        assert first[w0].data_kb == 1024 and first[w2].data_kb == 3072
        scans.clear()
        compare("nothing changed")
        assert scans == []          # nobody's files were scanned again
        job.do(1, "open extra " + job.paths[3])            # fd count 1 -> 2
        assert compare("an fd opened")[w1].data_kb == (2 + 4) * 1024
        assert scans == [w1]
        job.do(0, "read data")                              # counters move
        assert compare("a read")[w0].rchar > first[w0].rchar
        job.do(2, "map m " + job.paths[4])                  # vsize grows, fd count as it was
        compare("a file mapped")
        job.do(2, "unmap m")
        compare("a file unmapped")
        job.do(1, "close extra")
        assert compare("an fd closed")[w1].data_kb == 2 * 1024
        job.do(0, "close data")
        assert compare("its last data file closed")[w0].data_kb is None
        job.do(1, "exit")
        assert w1 not in compare("a worker exited")
        reused = job.reuse(w1, job.paths[4])
        job.workers.append(reused)
        got = compare("a new worker, maybe in the old one's PID")
        assert got[reused].data_kb == 5 * 1024
        if reused != w1:
            pytest.skip(f"PID {w1} was not given again (another process took it)")
        sampler.close()
    finally:
        job.close()


# ---------------------------------------------------------------------------- disks
def _line(major, minor, name, values):
    return f"{major:4d} {minor:7d} {name} " + " ".join(str(v) for v in values) + "\n"


def _texts():
    """Six diskstats reads: an idle disk, a busy one, a partition that moves every other
    read, one whose counters reset, one that appears and one that vanishes, a 14-field
    line and a garbled one."""
    out = []
    for step in range(6):
        lines = [_line(8, 0, "sda", [100] * 17),
                 _line(259, 0, "nvme0n1", [1000 + 37 * step * (k + 1) for k in range(17)]),
                 _line(259, 1, "nvme0n1p1", [500 + 11 * (step // 2) * (k + 1) for k in range(17)]),
                 _line(253, 0, "dm-0", [(9000 if step < 3 else 10) + k for k in range(17)]),
                 _line(7, 0, "loop0", [5] * 11)]
        if step >= 2:
            lines.append(_line(259, 2, "nvme0n1p2", [3 * step] * 17))
        if step < 4:
            lines.append(_line(8, 16, "sdb", [42 + step] * 17))
        if step == 3:
            lines.append("garbled line\n")
        out.append("".join(lines))
    return out


def _long_way(prev, cur, interval_s):
    """checked_intervals without its carry-over: every device derived in full."""
    out, deltas, dropped = {}, {}, {}
    for name, c in cur.items():
        p = prev.get(name)
        base = _base(c, p)
        d = _deltas(c, base)
        r = _rates_of(d, interval_s)
        why = implausible(c, p, interval_s, r)
        if why is None:
            out[name], deltas[name] = r, d
        else:
            dropped[name] = why
    return out, deltas, dropped


def test_diskstats_memo_and_unmoved_devices_are_exact():
    memo: dict = {}
    prev_warm = prev_cold = None
    carried = 0
    for step, text in enumerate(_texts()):
        warm, warm_warnings = diskstats.parse_checked(text, whole_lines=True, memo=memo)
        cold, cold_warnings = diskstats.parse_checked(text, whole_lines=True)
        assert warm == cold and warm_warnings == cold_warnings
        if prev_warm is not None:
            carried += sum(warm[n] is prev_warm.get(n) for n in warm)
            for interval_s in (1.0, 0.0, 0.25):
                got = checked_intervals(prev_warm, warm, interval_s)
                want = _long_way(prev_cold, cold, interval_s)
                assert got == want, (step, interval_s)
                assert [repr(x) for x in got] == [repr(x) for x in want]  # 0.0, not -0.0
        prev_warm, prev_cold = warm, cold
    assert carried >= 10      # the unmoved devices took the short way


def test_model_from_cached_disks_equals_cold(tmp_path):
    """Two samples' Models, made of memo-parsed and of freshly parsed diskstats, are the
    same in every disk figure (what the screens, JSON and recordings show)."""
    from gpudisk_top.collect.sample import Sample

    memo: dict = {}
    texts = _texts()
    models = {}
    for warm in (True, False):
        last = None
        seq = []
        for k, text in enumerate(texts):
            s = Sample(mono_s=100.0 + k, wall_s=1e9 + k)
            s.disks = diskstats.parse_checked(text, True, memo if warm else None)[0]
            m = Model.new(s, last)
            seq.append((m.disks, m.disk_deltas, m.disk_dropped, m.warnings))
            last = s
        models[warm] = seq
    assert models[True] == models[False]


def test_each_tick_counter_going_down_is_named_and_a_wrap_is_not():
    """The check on the 32-bit tick counters reads the interval's differences
    (_deltas): each one that went down is named by its own name, and a counter that
    wrapped past 2**32 is a real interval."""
    ticks = ("rd_ticks", "wr_ticks", "dc_ticks", "fl_ticks", "tot_ticks", "rq_ticks")
    prev = diskstats.DiskCounters.zero(8, 0)._replace(
        nfields=20, rd_ios=100, wr_ios=100, dc_ios=10, fl_ios=10, rd_sectors=800,
        wr_sectors=800, dc_sectors=80, **{t: 500 for t in ticks})
    for name in ticks:
        moved = dict(rd_ios=110, wr_ios=110, dc_ios=11, fl_ios=11, rd_sectors=880,
                     wr_sectors=880, dc_sectors=88, **{t: 600 for t in ticks})
        down = prev._replace(**dict(moved, **{name: 495}))
        rates, _, dropped = checked_intervals({"sda": prev}, {"sda": down}, 1.0)
        assert rates == {} and dropped["sda"].startswith(f"{name} went down from 500 to 495")
        wrapped_prev = prev._replace(**{name: 2**32 - 10})
        wrapped = prev._replace(**dict(moved, **{name: 5}))
        rates, deltas, dropped = checked_intervals({"sda": wrapped_prev}, {"sda": wrapped}, 1.0)
        assert dropped == {} and getattr(deltas["sda"], name) == 15
