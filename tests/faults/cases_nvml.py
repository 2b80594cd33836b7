"""Category 3: an NVML call that never returns, for each NVML function the collector calls,
hung from the start or after a delay, on every GPU or on one, for --once, record and
serve (the real command line with the stand-in GPUs of tests/standin.py).

The stand-in logs each call that enters a hung function, so the oracle knows whether the
hang was met: then the GPUs must read "unavailable: NVML has not answered ..." (never the
numbers of before), and in every case the disks and the host are sampled on time, --once
answers within its bound and record/serve stop within 3 s of SIGTERM.
"""

from __future__ import annotations

import re
import time
import urllib.request

import standin
from harness import HANDLED, PY, Case, Cases, Ctx, Result, finish, judge, parse_json, stop

CAT = 3

FUNCTIONS = (
    "nvmlInit", "nvmlSystemGetDriverVersion", "nvmlDeviceGetCount",
    "nvmlDeviceGetHandleByIndex", "nvmlDeviceGetName", "nvmlDeviceGetUUID",
    "nvmlDeviceGetPciInfo", "nvmlDeviceGetSamples", "nvmlDeviceGetUtilizationRates",
    "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetPowerUsage", "nvmlDeviceGetEnforcedPowerLimit",
    "nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetTemperature",
    "nvmlDeviceGetClockInfo", "nvmlDeviceGetPcieThroughput",
    "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetComputeRunningProcesses",
    "nvmlShutdown",
)

# logs every call that enters a hung function (the fake's _maybe_hang), then the stand-in
PRELUDE = r'''
import os as _os, time as _time
from gpudisk_top.sim import fake_nvml as _fake
_orig_hang = _fake.FakeNvml._maybe_hang
def _logged_hang(self, function, index):
    if self._hangs and ((function, None) in self._hangs or (function, index) in self._hangs):
        with open(_os.environ["GDT_HUNG_LOG"], "a") as _f:
            _f.write(f"{_time.time()} {function} {index}\n")
    return _orig_hang(self, function, index)
_fake.FakeNvml._maybe_hang = _logged_hang
'''


def standin_argv(ctx: Ctx, argv: list[str], hang: dict, gpus: int = 2,
                 processes=None) -> tuple[list[str], dict]:
    cmd, env = standin.command(argv, gpus=gpus, hang=hang, processes=processes or {},
                               util_pct=50.0)
    log = ctx.path("hung.log")
    return [PY, "-c", PRELUDE + standin._CODE], ctx.env(GDT_STANDIN=env["GDT_STANDIN"],
                                                         GDT_HUNG_LOG=log)


def hung_entries(ctx: Ctx) -> list[float]:
    try:
        with open(ctx.path("hung.log")) as f:
            return [float(x.split()[0]) for x in f if x.strip()]
    except OSError:
        return []


def _unavailable(status: str | None) -> bool:
    return bool(status) and status.startswith("unavailable") and "not answered" in status


# ------------------------------------------------------------------------ --once
def once_case(function: str, after_s: float, gpu: int | None):
    bound = 15.0 if function == "nvmlInit" else 10.0

    def fn(ctx: Ctx) -> Result:
        hang = {"function": function, "after_s": after_s, "gpu": gpu}
        argv, env = standin_argv(ctx, ["--once", "--json", "-i", "1"], hang)
        run = ctx.run(argv, env=env, timeout=40)

        def ok():
            doc = parse_json(run.out)
            if doc is None:
                return ["stdout is not one JSON object"]
            p = []
            if not doc.get("disks"):
                p.append("no disks in the report")
            if doc.get("host", {}).get("cpu_idle_pct") is None:
                p.append("no host CPU in the report")
            entered = hung_entries(ctx)
            status = doc.get("gpu_status")
            if function == "nvmlShutdown":
                return p                # called after the report: only the time counts
            if entered and not _unavailable(status):
                p.append(f"{function} hung, yet gpu_status is {status!r} with "
                         f"{len(doc.get('gpus', []))} GPUs read")
            if not entered and status != "ok":
                p.append(f"nothing hung in this window, yet gpu_status is {status!r}")
            if _unavailable(status) and function not in status:
                run.note = f"the status does not name the hung call: {status!r}"
            return p

        return judge(run, ok, bound_s=bound, bound_what="--once answered")
    return fn


# ------------------------------------------------------------------------ record
def record_case(function: str, after_s: float, gpu: int | None, run_s: float | None = None):
    run_s = after_s + 4.0 if run_s is None else run_s

    def fn(ctx: Ctx) -> Result:
        from gpudisk_top.record import Recording

        path = ctx.path("hung.gdtrec")
        hang = {"function": function, "after_s": after_s, "gpu": gpu}
        argv, env = standin_argv(ctx, ["record", "-o", path, "-i", "0.5"], hang)
        t0 = time.monotonic()
        proc = ctx.spawn(argv, env=env)
        time.sleep(run_s)
        if proc.poll() is not None:
            return judge(finish(proc, t0), lambda: ["record ended by itself"])
        took, prompt = stop(proc, 3.0)
        run = finish(proc, t0, note=f"stopped {took:.2f} s after SIGTERM")
        if not prompt:
            run.timed_out = True
            run.note = f"SIGTERM not honoured within 3 s (NVML call {function} hung)"
            return judge(run)

        def ok():
            p = []
            try:
                with Recording.open(path) as rec:
                    n = len(rec)
                    walls = [rec.wall_s(i) for i in range(n)]
                    samples = [rec.sample(i) for i in range(n)]
                    ended = rec.sessions[-1].end is not None
            except Exception as err:  # noqa: BLE001
                return [f"the recording cannot be read: {err}"]
            if n < run_s:
                p.append(f"{n} samples in {run_s:.0f} s at 0.5 s")
            if not ended:
                p.append("the session was not closed")
            if any(not s.disks for s in samples):
                p.append("a sample without disks")
            gaps = [b - a for a, b in zip(walls, walls[1:])]
            if gaps and max(gaps) > 2.0:
                p.append(f"a gap of {max(gaps):.2f} s between samples (interval 0.5 s)")
            entered = hung_entries(ctx)
            if entered and function != "nvmlShutdown":
                first = min(entered)
                after = [s for s, wall in zip(samples, walls) if wall > first + 2.5]
                stale = [s for s in after if not _unavailable(s.gpu.status)]
                if after and stale:
                    p.append(f"{len(stale)} of {len(after)} samples taken 2.5 s after the hang "
                             f"still say {stale[0].gpu.status!r}")
            return p

        return judge(run, ok)
    return fn


# ------------------------------------------------------------------------ serve
def serve_case(function: str, after_s: float, gpu: int | None):
    def fn(ctx: Ctx) -> Result:
        hang = {"function": function, "after_s": after_s, "gpu": gpu}
        argv, env = standin_argv(ctx, ["serve", "--listen", "127.0.0.1:0", "-i", "0.5"], hang,
                                 gpus=1, processes={0: [1]})
        t0 = time.monotonic()
        proc = ctx.spawn(argv, env=env)
        url = None
        deadline = time.monotonic() + 15
        lines = []
        while time.monotonic() < deadline and proc.poll() is None:
            line = proc.stderr.readline().decode("utf-8", "replace")
            lines.append(line)
            m = re.search(r"http://\S+/metrics", line)
            if m:
                url = m.group(0)
                break
        if url is None:
            run = finish(proc, t0)
            run.err = "".join(lines) + run.err
            return judge(run, lambda: ["never said where it serves"])
        time.sleep(max(0.0, after_s + 3.0 - (time.monotonic() - t0)))
        try:
            t_scrape = time.monotonic()
            during = urllib.request.urlopen(url, timeout=5).read().decode()
            scrape_s = time.monotonic() - t_scrape
        except OSError as err:
            during, scrape_s = None, None
            scrape_err = str(err)
        took, prompt = stop(proc, 3.0)
        run = finish(proc, t0, note=f"stopped {took:.2f} s after SIGTERM")
        run.err = "".join(lines) + run.err
        if not prompt:
            run.timed_out = True
            run.note = f"SIGTERM not honoured within 3 s (NVML call {function} hung)"
            return judge(run)

        def ok():
            if during is None:
                return [f"/metrics did not answer while NVML hung: {scrape_err}"]
            p = []
            if scrape_s > 2.0:
                p.append(f"a scrape took {scrape_s:.1f} s")
            entered = hung_entries(ctx)
            if "gpudisk_top_disk_reads_per_second{" not in during:
                p.append("no disk series while NVML hung")
            m = re.search(r"^gpudisk_top_sample_age_seconds (\S+)$", during, re.M)
            if not m or float(m.group(1)) > 1.5:
                p.append(f"sample age {m.group(1) if m else 'missing'} (interval 0.5 s)")
            if entered and function != "nvmlShutdown":
                if "gpudisk_top_gpus_available 0.0" not in during:
                    p.append("gpus_available is not 0 while NVML hangs")
                if "gpudisk_top_gpu_utilization_ratio{" in during:
                    p.append("GPU utilization still served while NVML hangs (stale numbers)")
            return p

        return judge(run, ok)
    return fn


def cases() -> list[Case]:
    out = Cases(CAT)
    for f in FUNCTIONS:
        out.add(f"once/{f}/from-start", f"--once with {f} hung from the start",
                once_case(f, 0.0, None), timeout_s=45, expect=HANDLED)
        out.add(f"once/{f}/after-1.2s", f"--once with {f} hung during the second sample",
                once_case(f, 1.2, None), timeout_s=45, expect=HANDLED)
        out.add(f"record/{f}/after-2s", f"record -i 0.5 with {f} hung after 2 s",
                record_case(f, 2.0, None), timeout_s=45, expect=HANDLED)
    for f in ("nvmlDeviceGetPowerUsage", "nvmlDeviceGetSamples", "nvmlDeviceGetComputeRunningProcesses",
              "nvmlDeviceGetTemperature"):
        out.add(f"once/{f}/gpu1-only", f"--once with {f} hung on GPU 1 only",
                once_case(f, 0.0, 1), timeout_s=45, expect=HANDLED)
        out.add(f"record/{f}/gpu1-only-after-2s", f"record with {f} hung on GPU 1 after 2 s",
                record_case(f, 2.0, 1), timeout_s=45, expect=HANDLED)
    for f in ("nvmlInit", "nvmlDeviceGetCount", "nvmlDeviceGetPowerUsage"):
        out.add(f"record/{f}/from-start", f"record with {f} hung from the start, "
                "SIGTERM after 4 s", record_case(f, 0.0, None), timeout_s=45,
                expect=HANDLED)
        out.add(f"record/{f}/from-start-14s", f"record with {f} hung from the start, "
                "SIGTERM after 14 s", record_case(f, 0.0, None, run_s=14.0), timeout_s=45,
                expect=HANDLED)
    for f in ("nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex", "nvmlDeviceGetSamples",
              "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetPowerUsage", "nvmlDeviceGetPcieThroughput",
              "nvmlDeviceGetComputeRunningProcesses", "nvmlShutdown"):
        out.add(f"serve/{f}/after-2s", f"serve -i 0.5 with {f} hung after 2 s",
                serve_case(f, 2.0, None), timeout_s=45, expect=HANDLED)
    out.add("serve/nvmlInit/from-start", "serve with nvmlInit hung from the start",
            serve_case("nvmlInit", 0.0, None), timeout_s=45, expect=HANDLED)
    return out
