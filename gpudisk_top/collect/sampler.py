"""The sampler: one call reads every source once and returns a raw Sample.

Sources are independent: one that fails becomes a warning or a status in the sample, and
the others are still read.  The Sampler is a SampleSource (collect/sample_source.py): it
prints nothing; what starting or closing it did (--delayacct) are notes the command
drains.  NVML runs on a thread of its own with a deadline
(collect/gpu_deadline.py): a driver call that hangs never delays the disks.  Device identity (sysfs, mountinfo) is re-read only every
DEVICE_REFRESH_S seconds or when the set of devices changes, not on every sample.
"""

from __future__ import annotations

import os
import time

from gpudisk_top.collect import diskstats, lustre, nfsstats, utilpct
from gpudisk_top.collect.blockdev import BlockDevices
from gpudisk_top.collect.cgjob import CgJobRaw, CgJobReader, device_names, job_cgroup
from gpudisk_top.collect.delayacct import OFF_WARNING, DelayAccounting
from gpudisk_top.collect.detail import DetailCadence
from gpudisk_top.collect.devmap import DeviceFileMapper
from gpudisk_top.collect.gpu import GpuCollector
from gpudisk_top.collect.gpu_deadline import DeadlineGpuCollector, timeout_for
from gpudisk_top.collect.ioscan import SCAN_OPEN_S, IoScan
from gpudisk_top.collect.jobid import JobIdentifier
from gpudisk_top.collect.mounts import MountCollector, MountTable
from gpudisk_top.collect.host import parse_self_cgroup, read_host
from gpudisk_top.collect.pidmap import PidMapper
from gpudisk_top.collect.pidfiles import parse_pid_io
from gpudisk_top.collect.procio import OTHERS_CONTENDED, ProcIoCollector
from gpudisk_top.collect.roots import FileCache, Roots
from gpudisk_top.collect.sample import DeviceInfo, ProcIoRaw, Sample
from gpudisk_top.collect.visibility import PID_NAMESPACE, blind_spots

DEVICE_REFRESH_S = 10.0


ACCT_CHANGE_SAID_S = 60.0   # how long a switch of kernel.task_delayacct under us is said


class SourceError(Exception):
    """Nothing at all could be read from the given roots."""


class Sampler:
    """Reads disks, GPUs, host and GPU-process I/O into one Sample per call."""

    def __init__(self, roots: Roots | None = None, nvml=None, gpu: GpuCollector | None = None,
                 interval_s: float = 1.0, delayacct: bool = False,
                 gpu_init_wait_s: float | None = None, ceilings=None, health=None) -> None:
        """gpu_init_wait_s: how long a sample may wait for nvmlInit (seconds on a node
        without persistence mode); by default no longer than for any NVML call, so that
        sampling the disks never waits on it (--once, which makes one report, waits).
        ceilings: load(infos, roots) -> {name: a probe's Ceiling}, what `gpudisk-top
        probe` measured for the devices (probe.store.load_ceilings); None: none.
        health: a started HealthPoller (collect/health.py) whose latest snapshot each
        sample takes by reference, closed with the sampler; None: no health."""
        self.roots = roots or Roots()
        self._ceilings = ceilings
        # the slow health poller (collect/health.py HealthPoller, started by the caller;
        # closed with us): each sample takes its latest snapshot, one attribute read
        self.health = health
        self._health_error_said: str | None = None   # the poller's error, said once
        self._delayacct = DelayAccounting() if delayacct else None
        # what starting or closing did or could not do, one line each, until drained
        self._notes: list[str] = []
        self._acct_change: tuple[str, float] | None = None  # (what, said until monotonic s)
        if self._delayacct is not None:
            said = self._delayacct.enable()
            if said:
                self._notes.append(said)
        self._blockdevs = BlockDevices(self.roots)
        self._pidmap = PidMapper(self.roots)
        self._devmap = DeviceFileMapper(self.roots)
        # what cannot be seen from here (no /sys, a container's PID namespace, not root,
        # no PSI): decided once, said first in every sample's warnings
        self.blind_spots = blind_spots(self.roots, self._pidmap.host_namespace,
                                       self._pidmap.reason)
        self._interval_s = interval_s
        timeout_s = timeout_for(interval_s)
        self.gpu = DeadlineGpuCollector(
            gpu or GpuCollector(nvml=nvml, resolve_pid=self._pidmap.resolve),
            timeout_s=timeout_s, init_timeout_s=max(timeout_s, gpu_init_wait_s or 0.0))
        # the files read every sample stay open between samples (see FileCache)
        self._files = FileCache()
        self._diskstats_memo: dict = {}   # the last read's lines, parsed (diskstats.parse_checked)
        self._mount_table = MountTable(self.roots)
        self._procio = ProcIoCollector(self.roots, files=self._files, mount_table=self._mount_table)
        self._jobs = JobIdentifier(self.roots, self.roots.rootfs)
        self._mounts = MountCollector(self.roots, self._mount_table,
                                      {"nfs": nfsstats.read_counters, "lustre": lustre.read_counters})
        self._ioscan = IoScan(self.roots)
        # each job's cgroup v2 totals, every sample (collect/cgjob.py; {} on cgroup v1)
        self._cgjobs = CgJobReader(self.roots)
        self.io_view = False   # the I/O process view is open: scan the node more often
        self._cover = False    # the next sample keeps every process's I/O counters
        self._rescan = False   # ... and the one after it scans the node again
        self._devices: dict[str, DeviceInfo] = {}
        self._devices_at = float("-inf")
        self._last: Sample | None = None
        # how often the processes are read (collect/detail.py): None, every sample; a
        # command's session sets a DetailCadence (session/detail.py)
        self.detail: DetailCadence | None = None
        self._read_gpu_pids: dict[int, int] | None = None   # at the last read of them

    @property
    def interval_s(self) -> float:
        return self._interval_s

    @interval_s.setter
    def interval_s(self, value: float) -> None:
        """The sampling interval changed (the dashboard's + and -): so does how long a
        sample waits for NVML."""
        self._interval_s = value
        self.gpu.timeout_s = timeout_for(value)

    @property
    def scan_open_s(self) -> float:
        """How often the node is scanned for I/O while the I/O view is open."""
        return SCAN_OPEN_S

    def drain_notes(self) -> list[str]:
        """What starting or closing did or could not do since the last drain (one line
        each, oldest first), for the command to say.  Never raises."""
        notes, self._notes = self._notes, []
        return notes

    def _device_info(self, counters, now: float) -> dict[str, DeviceInfo]:
        if now - self._devices_at >= DEVICE_REFRESH_S or counters.keys() != self._devices.keys():
            self._devices = self._with_ceilings(self._blockdevs.describe(counters))
            self._devices_at = now
        return self._devices

    def _with_ceilings(self, infos: dict[str, DeviceInfo]) -> dict[str, DeviceInfo]:
        """Each device with the ceiling `gpudisk-top probe` measured for it, if any (the
        detector's "at 31% of its ceiling"); one stat of the results file when none."""
        if self._ceilings is None:
            return infos
        for name, c in self._ceilings(infos, self.roots).items():
            info = infos[name]
            info.ceiling_iops, info.ceiling_mib_s = c.randread_qd32_iops, c.seq_read_mib_s
            if c.randread_qd1_iops:
                info.probed_read_ms = 1000.0 / c.randread_qd1_iops
        return infos

    def sample(self) -> Sample:
        """Read everything once.  Never raises for a source that cannot be read; see
        check_sources() for the case where nothing can be read at all."""
        mono = time.monotonic()
        sample = Sample(mono_s=mono, wall_s=time.time())
        sample.warnings.extend(b.line() for b in self.blind_spots if b.key != PID_NAMESPACE)
        try:
            sample.disks, warnings = diskstats.read(self.roots, self._files, self._diskstats_memo)
            sample.warnings.extend(warnings)
        except OSError as err:
            sample.warnings.append(f"cannot read {self.roots.proc('diskstats')}: {err.strerror or err}")
        sample.devices = self._device_info(sample.disks, mono)
        sample.gpu = self.gpu.collect()
        if (dropped := utilpct.check_snapshot(sample.gpu)) is not None:
            sample.warnings.append(dropped)      # n/a: it goes no further than here
        if self._pidmap.host_namespace is not True and sample.gpu.gpus:
            # only GPU processes suffer from another PID namespace: said where there are GPUs
            sample.warnings[:0] = [b.line() for b in self.blind_spots if b.key == PID_NAMESPACE]
            sample.warnings.extend(self._devmap.apply(sample.gpu))
        gpu_pids = sample.gpu.local_pids()
        # the job's cgroup: the first GPU process's (the lowest GPU's), else ours
        sample.host = read_host(self.roots, self._files, job_pid=next(iter(gpu_pids), None))
        sample.warnings.extend(self._host_read_errors())
        sample.warnings.extend(self._blockdevs.warnings)
        if not self._read_procs(sample, gpu_pids):
            return self._carried(sample, mono, gpu_pids)
        sample.procs = self._procio.collect(gpu_pids)
        self._jobs.tag_all(sample.procs, gpu_pids)      # each GPU process's job
        if sample.procs and not self._procio.delayacct_on:
            sample.warnings.append(OFF_WARNING)
        if self._procio.delayacct_change is not None:
            # someone switched the node-wide setting under us: said for a minute
            self._acct_change = (self._procio.delayacct_change, mono + ACCT_CHANGE_SAID_S)
            self._procio.delayacct_change = None
        if self._acct_change is not None and mono < self._acct_change[1]:
            sample.warnings.append(self._acct_change[0])
        if sample.procs:
            others = self._procio.collect_others(sample.procs, self._contended(sample),
                                                 self._scans_slow_s())
            sample.procs.update(others)
        sample.mounts = self._mounts.collect(sample.procs, mono)
        daemons = [m.daemon_pid for m in sample.mounts.values() if m.daemon_pid is not None]
        sample.procs.update(self._io_busiest(sample.procs, mono, daemons))
        return self._done(sample, gpu_pids)

    def _done(self, sample: Sample, gpu_pids: dict[int, int]) -> Sample:
        # here, not in the process reads: a sample that carries them reads the totals too
        sample.cgjobs = self._job_cgroups(sample, gpu_pids)
        if self.health is not None:
            sample.health = self.health.latest
            # a poll that failed (a bug) leaves the last readings standing: said once,
            # and again only if it fails otherwise after
            error = self.health.error
            if error is not None and error != self._health_error_said:
                sample.warnings.append(error + " (the last readings stand)")
            self._health_error_said = error
        sample.warnings = list(dict.fromkeys(sample.warnings))  # two readers, one file
        self._last = sample
        return sample

    def _read_procs(self, sample: Sample, gpu_pids: dict[int, int]) -> bool:
        """Whether this sample reads the processes (collect/detail.py); sets its
        procs_age_s where a slow cadence is in force."""
        cadence = self.detail
        if cadence is None:
            return True
        changed = gpu_pids != self._read_gpu_pids
        why = cadence.due(sample, self._last, self._interval_s, changed, self.io_view)
        if why is None:
            return False
        self._read_gpu_pids = dict(gpu_pids)
        sample.procs_age_s = cadence.read_age_s(why)
        return True

    def _scans_slow_s(self) -> float | None:
        """The node's scans' cadence while this sample's read is the slow cadence's
        (collect/detail.py); None: their own."""
        return None if self.detail is None else self.detail.scans_every_s()

    def _job_cgroups(self, sample: Sample, gpu_pids: dict[int, int]) -> dict[str, CgJobRaw]:
        """Each job's cgroup totals, by job id: the cgroup v2 its GPU processes share
        (job_cgroup), from each one's "0::" line read now (a carried read's tags say the
        job; a process moved since is seen here).  None for a job one of whose GPU
        processes has no v2 path (exited, a v1-only host) and for a cgroup two jobs
        share (its totals are both's).  Never raises."""
        if self._cgjobs.root is None or not gpu_pids:
            return {}
        by_job: dict[str, list] = {}
        for local in gpu_pids:
            raw = sample.procs.get(local)
            if raw is None or raw.job is None:
                continue
            text = self._files.read(self.roots.proc(str(local), "cgroup"))
            by_job.setdefault(raw.job[0], []).append(parse_self_cgroup(text) if text else None)
        paths = {job: None if None in cgs else job_cgroup(cgs) for job, cgs in by_job.items()}
        owners = [p for p in paths.values() if p is not None]
        paths = {job: p for job, p in paths.items() if p is not None and owners.count(p) == 1}
        read = self._cgjobs.read(paths.values(), device_names(sample.disks))
        return {job: read[p] for job, p in paths.items() if p in read}

    def _carried(self, sample: Sample, mono: float, gpu_pids: dict[int, int]) -> Sample:
        """A sample that does not read the processes: the last read's, unchanged (the
        same dict), with their age; the mounts' own counters are still read."""
        last = self._last
        sample.procs = last.procs
        sample.procs_age_s = self.detail.carried_age_s(mono)
        if sample.procs and not self._procio.delayacct_on:
            sample.warnings.append(OFF_WARNING)
        if self._acct_change is not None and mono < self._acct_change[1]:
            sample.warnings.append(self._acct_change[0])
        sample.mounts = self._mounts.collect(sample.procs, mono)
        return self._done(sample, gpu_pids)

    def cover_next_interval(self) -> None:
        """Make the interval after the next sample name everyone who did block I/O in it.

        A process the node scan finds busy is followed from the sample after that scan,
        so its first interval has no rates: a session's first interval never names who
        else loads a disk, and that interval is all `--once` reports.  The next sample
        therefore keeps the counters of every process its scan reads (the scan reads them
        all anyway): whichever the following sample's scan finds busiest over the
        interval between the two has rates for exactly that interval."""
        self._cover = True

    def _io_busiest(self, already, mono: float, daemons=()):
        """The processes outside the job doing the most block I/O, found by a scan of
        the node now and then (collect/ioscan.py), and the daemons of the FUSE mounts the
        job reads (their CPU and traffic), followed every sample."""
        cover, self._cover = self._cover, False
        rescan, self._rescan = self._rescan, cover
        if cover or rescan or self._ioscan.due(mono, self.io_view, self._scans_slow_s()):
            self._ioscan.run(mono, keep=cover, read_now={
                pid: raw.read_bytes + raw.write_bytes for pid, raw in already.items()
                if raw.read_bytes is not None and raw.write_bytes is not None})
        out = self._procio.follow(list(dict.fromkeys([*daemons, *self._ioscan.busiest])),
                                  already)
        if cover:
            # bare counters (no name, no devices): the next sample reads the busiest fully
            for pid, data in self._ioscan.counters.items():
                if pid not in already and pid not in out:
                    io = parse_pid_io(data.decode("ascii", "replace"))
                    out[pid] = ProcIoRaw(pid=pid, rchar=io.get("rchar"), wchar=io.get("wchar"),
                                         read_bytes=io.get("read_bytes"),
                                         write_bytes=io.get("write_bytes"),
                                         syscr=io.get("syscr"))
            self._ioscan.counters = {}
        return out

    def _host_read_errors(self) -> list[str]:
        """A warning for each host file that is there but could not be read (a FIFO, a
        device, permission denied under --procfs): its numbers are n/a, and say why.
        Processes' own files are not: processes exit, and others' are not ours to read."""
        out = []
        proc_dir = os.path.join(self.roots.procfs, "")
        for path, why in self._files.errors.items():
            rel = path[len(proc_dir):] if path.startswith(proc_dir) else ""
            if rel.split("/", 1)[0].isdigit() or path == self.roots.proc("diskstats"):
                continue    # a process's file; diskstats says it itself
            out.append(f"cannot read {path}: {why}")
        return out

    def _contended(self, sample: Sample) -> bool:
        """Whether tasks waited for a CPU in this interval (PSI cpu "some", else the
        share of idle time): only then is it worth naming who holds the CPUs.  At the
        first sample there is no interval yet: one search then (a few ms, once), so that
        the second sample (a --once's last) has the others' CPU time to compare."""
        last = self._last
        if last is None:
            return True
        if last.host is None or sample.host is None:
            return False
        elapsed_us = (sample.mono_s - last.mono_s) * 1e6
        now, before = sample.host.psi.get("cpu"), last.host.psi.get("cpu")
        if now is not None and before is not None and elapsed_us > 0:
            return (now.some_us - before.some_us) >= OTHERS_CONTENDED * elapsed_us
        a, b = sample.host.cpu, last.host.cpu
        if a is None or b is None:
            return False
        # guest time is already in user and nice (iostat's rule)
        total = sum(getattr(a, f) - getattr(b, f) for f in
                    ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"))
        idle = (a.idle - b.idle) + (a.iowait - b.iowait)
        return total > 0 and idle < 0.1 * total

    def wait_health(self, timeout_s: float) -> bool:
        """Wait (at most timeout_s) for the health poller's first reading: `--once`
        makes one report, and its health is part of it.  False: it is not in yet; then
        the next sample has the disks read so far, the others "not read yet"."""
        if self.health is None or self.health.wait_first(timeout_s):
            return True
        self.health.publish_partial()
        return False

    def close(self) -> None:
        """Stop the health poller and NVML, close the files, and put back what
        --delayacct switched; where it is left on, that is a note (drain_notes)."""
        if self.health is not None:
            self.health.close()
        if self._delayacct is not None:
            left_on = self._delayacct.restore()
            if left_on:
                self._notes.append(left_on)
        self.gpu.close()
        self._cgjobs.close()
        self._procio.close()
        self._files.close()
        self._pidmap.close()


def check_sources(roots: Roots) -> None:
    """Raise SourceError with a one-line reason when the roots cannot be read at all."""
    if not os.path.isdir(roots.procfs):
        raise SourceError(f"--procfs {roots.procfs}: no such directory")
    if not os.path.exists(roots.proc("diskstats")) and not os.path.exists(roots.proc("stat")):
        raise SourceError(f"--procfs {roots.procfs}: not a procfs (no diskstats, no stat)")
