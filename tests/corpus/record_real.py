#!/usr/bin/env python3
"""Record the real half of the corpus: real jobs on this machine, labelled by what the job
was doing, never by the detector.

    python tests/corpus/record_real.py [--seconds 60] [--only NAME,...] [--torch]

Each scenario runs a real job (tests/jobs/loader_job.py: a trainer and DataLoader-like
worker processes; with --torch also ../shared/device/train_scenarios.py, a PyTorch job on
the CPU build of torch) on this machine's real disk and CPUs, often with other real load
beside it, while `gpudisk-top record -i 1` records it with a stand-in GPU whose
utilization follows the trainer's real progress (tests/standin.py).  Into
tests/fixtures/real/ go NAME.gdtrec and NAME.labels.json:

    {"scenario": NAME, "description": ..., "job_pid": PID, "device": "vda" | null,
     "healthy_steps_s": 50.0, "labels": [[wall_s, label], ...]}

one label per second of the job's own log (its steps that second): under 70 % of its
healthy rate (the detector's GPU threshold) the job was starved, and the label is what
the scenario starves it of (disk-starved, cpu-starved, checkpoint-stall while it writes
its checkpoint); otherwise healthy; idle where there is no job.  tests/corpus/score.py
scores the detector on them beside the simulated scenarios.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
ROOT = os.path.dirname(TESTS)
OUT = os.path.join(TESTS, "fixtures", "real")
sys.path.insert(0, TESTS)

import realdisk  # noqa: E402
import standin  # noqa: E402

LOADER_JOB = os.path.join(TESTS, "jobs", "loader_job.py")
TORCH_JOB = os.path.join(os.path.dirname(ROOT), "shared", "device", "train_scenarios.py")
LOADER_HEALTHY_STEPS_S = 50.0
STARVED_FRACTION = 0.7


def cpu_hogs(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def disk_load(path: str) -> list[subprocess.Popen]:
    return [subprocess.Popen(["fio", "--name=other", f"--filename={path}.other", "--size=256M",
                              "--rw=randread", "--bs=4k", "--direct=1", "--ioengine=libaio",
                              "--iodepth=4", "--thread", "--time_based", "--runtime=600"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]


# name -> (description, job mode or None, workers, label when starved, other load)
SCENARIOS = {
    "real-disk-latency": ("2 workers, each sample 128 synchronous 4 KiB O_DIRECT reads: "
                          "latency-bound", "disk", 2, "disk-starved", None),
    "real-disk-latency-cpu-hogs": ("the same, with busy loops on every CPU beside it",
                                   "disk", 2, "disk-starved", "cpu"),
    "real-disk-saturated": ("8 workers on a loop volume capped at 2000 read IOPS",
                            "disk-capped", 8, "disk-starved", None),
    "real-cpu-own": ("1 worker decoding (10 ms of CPU a sample)", "cpu", 1, "cpu-starved",
                     None),
    "real-cpu-own-disk-load": ("the same, beside another process's disk reads", "cpu", 1,
                               "cpu-starved", "disk"),
    "real-cpu-others": ("2 workers needing 3 ms of CPU a sample while busy loops take "
                        "every CPU", "light-cpu", 2, "cpu-starved", "cpu2"),
    "real-healthy-disk-load": ("fed from memory, beside another process's disk reads",
                               "healthy", 2, None, "disk"),
    "real-checkpoint": ("fed from memory; 2 GiB written and fsynced every 10 s",
                        "checkpoint", 2, "checkpoint-stall", None),
    "real-checkpoint-frequent": ("fed from memory; 2 GiB written and fsynced every 3 s: "
                                 "saves of a second or two, their fsync's flush after Dirty "
                                 "is gone", "checkpoint", 2, "checkpoint-stall", None),
    "real-idle-disk-load": ("no job; another process reads the disk", None, 0, None, "disk"),
}
# the job's own arguments beyond its mode, workers and reads
JOB_ARGS = {"real-checkpoint-frequent": ["--ckpt-every", "3"]}
# the recorder's interval where 1 s would be too coarse: a save of a second or two
# spans the detector's 3 intervals to open an episode only at a finer one
INTERVAL_S = {"real-checkpoint-frequent": 0.5}
TORCH_SCENARIOS = {
    "torch-disk": ("train_scenarios.py disk --workers 2 (one a CPU here): 32 random 4 KiB "
                   "O_DIRECT reads a sample", "disk", "disk-starved"),
    "torch-cpu": ("train_scenarios.py cpu: 1 worker doing FFTs", "cpu", "cpu-starved"),
    "torch-healthy": ("train_scenarios.py healthy: batches from memory", "healthy", None),
}


device_of = realdisk.whole_disk


def labels_from(truth: list[dict], starved_label: str | None, healthy: float,
                checkpoints: list[tuple[float, float]] = ()) -> list[list]:
    out = []
    for t in truth:
        slow = t["steps"] < STARVED_FRACTION * healthy
        label = "healthy"
        if slow and starved_label == "checkpoint-stall":
            label = ("checkpoint-stall" if any(a - 1 <= t["wall"] <= b + 1 for a, b in checkpoints)
                     else "healthy")
        elif slow and starved_label:
            label = starved_label
        out.append([t["wall"], label])
    return out


def record(name: str, seconds: float, job_argv, job_pid_of, healthy: float, starved_label,
           description: str, device: str | None, progress: str, truth_path: str,
           others=(), preexec_fn=None, progress_from_stdout=False) -> None:
    rec = os.path.join(OUT, f"{name}.gdtrec")
    if os.path.exists(rec):
        os.unlink(rec)
    job = None
    pump = None
    if job_argv is not None:
        job = subprocess.Popen(job_argv, preexec_fn=preexec_fn,
                               stdout=subprocess.PIPE if progress_from_stdout else None, text=True)
        if progress_from_stdout:
            pump = ProgressPump(job, progress, truth_path)
        time.sleep(3)                        # let the workers start
    pid = job_pid_of(job) if job is not None else None
    gpu = dict(gpus=1, processes={0: [pid]} if pid else {}, progress=progress if pid else None,
               healthy_steps_s=healthy)
    try:
        proc = standin.popen(["record", "-o", rec, "-i", f"{INTERVAL_S.get(name, 1):g}",
                              "--duration", str(seconds)], **gpu)
        proc.wait(seconds + 60)
    finally:
        for p in list(others) + ([job] if job is not None else []):
            p.kill()
            p.wait()
        if pump is not None:
            pump.join()
    truth = []
    if os.path.exists(truth_path):
        with open(truth_path) as f:
            truth = [json.loads(line) for line in f if line.strip()]
    checkpoints = [(t["wall"] - 1, t["wall"]) for t in truth if t.get("checkpoint")]
    # (the job logs every second, those a checkpoint held it in too: steps 0)
    from gpudisk_top.record import Recording

    with Recording.open(rec) as r:
        start, end = r.start_s, r.end_s
    if pid is None:
        labels = [[start + k, "idle"] for k in range(int(end - start) + 1)]
    else:
        labels = [x for x in labels_from(truth, starved_label, healthy, checkpoints)
                  if start - 1 <= x[0] <= end + 1]
    with open(os.path.join(OUT, f"{name}.labels.json"), "w") as f:
        json.dump({"scenario": name, "description": description, "job_pid": pid,
                   "device": device, "healthy_steps_s": healthy, "labels": labels}, f)
        f.write("\n")
    print(f"{name}: {len(labels)} labels, {os.path.getsize(rec) / 1024:.0f} KiB", flush=True)


class ProgressPump:
    """train_scenarios.py prints {"wall", "steps"} once a second: turn that into the
    progress file the stand-in GPU follows and the truth lines the labels come from."""

    def __init__(self, job, progress: str, truth_path: str) -> None:
        import threading

        self.total = 0
        self.thread = threading.Thread(target=self._run, args=(job, progress, truth_path),
                                       daemon=True)
        self.thread.start()

    def _run(self, job, progress, truth_path) -> None:
        with open(truth_path, "a") as truth:
            for line in job.stdout:
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue
                self.total += obj["steps"]
                with open(progress + ".tmp", "w") as f:
                    f.write(f"{self.total} {obj['wall']}\n")
                os.replace(progress + ".tmp", progress)
                truth.write(json.dumps({"wall": obj["wall"], "steps": obj["steps"]}) + "\n")
                truth.flush()

    def join(self) -> None:
        self.thread.join(5)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--only", default="")
    ap.add_argument("--torch", action="store_true", help="also the PyTorch job")
    a = ap.parse_args()
    only = set(filter(None, a.only.split(",")))
    os.makedirs(OUT, exist_ok=True)
    work = tempfile.mkdtemp(prefix="gdt-real-", dir="/var/tmp")
    data = realdisk.random_file(os.path.join(work, "data.bin"), 768)
    device = device_of(data)
    ncpu = os.cpu_count() or 2
    try:
        for name, (desc, mode, workers, starved, other) in SCENARIOS.items():
            if only and name not in only:
                continue
            progress, truth = os.path.join(work, f"{name}.progress"), os.path.join(work, f"{name}.truth")
            others = (cpu_hogs(ncpu) if other == "cpu" else cpu_hogs(2 * ncpu) if other == "cpu2"
                      else disk_load(data) if other == "disk" else [])
            target, dev, preexec, cleanup = data, device, None, None
            if mode == "disk-capped":
                target, preexec, cleanup = capped_volume(work)
                dev = os.path.basename(target)
            job_argv = None
            if mode is not None:
                job_mode = "disk" if mode == "disk-capped" else mode
                job_argv = [sys.executable, LOADER_JOB, job_mode, "--workers", str(workers),
                            "--seconds", str(a.seconds + 20), "--data", target, "--progress",
                            progress, "--truth", truth, "--reads",
                            "32" if mode == "disk-capped" else "128", *JOB_ARGS.get(name, [])]
            try:
                record(name, a.seconds, job_argv, lambda j: j.pid, LOADER_HEALTHY_STEPS_S,
                       starved, desc, dev if starved == "disk-starved" else None, progress,
                       truth, others, preexec)
            finally:
                if cleanup:
                    cleanup()
        if a.torch:
            healthy = torch_healthy_rate(work, data)
            # the 4 GiB dataset the disk mode reads, written before its recording starts
            subprocess.run([sys.executable, TORCH_JOB, "disk", "--seconds", "1", "--workers", "1",
                            "--data", os.path.join(work, "torch-dataset.bin")],
                           capture_output=True, timeout=900)
            for name, (desc, mode, starved) in TORCH_SCENARIOS.items():
                if only and name not in only:
                    continue
                progress, truth = os.path.join(work, f"{name}.progress"), os.path.join(work, f"{name}.truth")
                argv = [sys.executable, TORCH_JOB, mode, "--seconds", str(a.seconds + 20),
                        "--data", os.path.join(work, "torch-dataset.bin")]
                if mode == "disk":
                    argv += ["--workers", str(os.cpu_count() or 2)]
                record(name, a.seconds, argv, lambda j: j.pid, healthy, starved,
                       desc + f" (healthy: {healthy:.0f} steps a second here)",
                       device if starved == "disk-starved" else None, progress, truth,
                       progress_from_stdout=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def torch_healthy_rate(work: str, data: str) -> float:
    """Steps a second of train_scenarios.py healthy on this machine's CPU: what "healthy"
    means for the torch scenarios."""
    proc = subprocess.run([sys.executable, TORCH_JOB, "healthy", "--seconds", "12", "--data",
                           os.path.join(work, "torch-dataset.bin")],
                          capture_output=True, text=True, timeout=120)
    steps = [json.loads(x)["steps"] for x in proc.stdout.splitlines() if x.startswith("{")][2:]
    return sorted(steps)[len(steps) // 2]


def capped_volume(work: str):
    """A loop device over a file on the real disk, reads capped at 2000 IOPS for the
    job's cgroup (realdisk.IopsCap)."""
    path = realdisk.random_file(os.path.join(work, "volume.img"), 256)
    dev = subprocess.run(["losetup", "--direct-io=on", "--show", "-f", path],
                         capture_output=True, text=True, check=True).stdout.strip()
    cap = realdisk.IopsCap.for_disk_of(path, 2000)

    def cleanup():
        subprocess.run(["losetup", "-d", dev])
        cap.remove()
    return dev, cap.enter_self, cleanup


if __name__ == "__main__":
    sys.exit(main())
