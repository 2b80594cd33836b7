"""Category 12, part `probes`: issue 35 item 4 (a stored ceiling is believed whatever the
device does) and item 6's fio that outlived a `kill -9` of `probe`.

- `file/<kind>/<command>`: a probes.json nested 100,000 deep, a run of 100,000 opening
  brackets, one over the size cap, truncated, empty, of a future version, not JSON, not
  a results file, through `--once`, `record`, `serve` (past a device refresh), the
  dashboard and `probe`.  docs/probe.md: a results file that cannot be used is said in one
  warning line a run, and the rest goes on; `probe` replaces a damaged file (saying so)
  and refuses to overwrite one a newer gpudisk-top wrote.
- `entry/<kind>`: this disk's entry with a ceiling of 0, a negative or a non-number
  figure, or no ceiling object: one warning line naming the probe, through `--once`.
- `ceiling/<kind>`: a real job (tests/jobs/loader_job.py, 2 workers reading 4 KiB blocks
  with O_DIRECT from a file on the real disk) on a stand-in GPU, and a stored ceiling for
  that disk below what the disk does in the interval (1 r/s, 100 r/s, 0.001 MiB/s), one
  inconsistent (QD1 far above QD32) or above any device (1e12 r/s): `--once --json`'s
  verdict never uses it (no figure marked as the probe's) and says the probe was ignored;
  an honest ceiling (the control) is used and not doubted.
- `fio-killed/kill-9`: `probe --engine fio` killed with SIGKILL while fio reads: fio (and
  every process it made) must be gone within 3 s (docs/probe.md: never left running).

Each case writes its own state directory (XDG_STATE_HOME) in its own case directory.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import signal
import shutil
import subprocess
import threading
import time

from harness import (PY, WARNING_PREFIX, Case, Cases, Ctx, Result, finish, gdt_argv, judge,
                     parse_json, run_pty)

CAT = 12
FORMAT = "gpudisk-top probes"
NESTED = 100_000
CAP_BYTES = 16 * 2**20           # docs/probe.md: a results file larger than this is not one
JOB = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "jobs",
                   "loader_job.py")
# the marks of a figure the verdict took from a probe (verdict/detect/storage.py's headroom,
# verdict/whatif.py's caps and bases)
PROBE_USED = ("(probe)", "from the probe", "(the probe's", "r/s at QD32")
IGNORED = re.compile(r"probe of \S+ ignored")
# an honest probe of this project's VM disk (QD1 17k, QD32 80k, 1.5 GB/s), generously
# above: 2 synchronous readers never come near twice these
HONEST = {"randread_qd32_iops": 200000.0, "randread_qd1_iops": 20000.0,
          "seq_read_mib_s": 3000.0}


# ------------------------------------------------------------------ this machine's disk
_lock = threading.Lock()
_data: dict = {}


def _disk() -> dict:
    """The real disk under /var/tmp, its probe identity, and a 256 MiB random file on it
    (made once a run, removed at exit) with the reads a sample that starve 2 workers."""
    with _lock:
        if not _data:
            import realdisk
            from gpudisk_top.collect.roots import Roots
            from gpudisk_top.probe.target import describe_devices, identity

            roots = Roots()
            device = realdisk.whole_disk(realdisk.BASE)
            path = os.path.join(realdisk.BASE, f"gdt-r35-probes-{os.getpid()}.bin")
            atexit.register(lambda: os.path.exists(path) and os.unlink(path))
            realdisk.random_file(path, 256)
            _data.update(device=device, data=path,
                         identity=identity(roots, describe_devices(roots), device)[0],
                         reads=realdisk.starving_reads(path, 2, 128))
        return _data


def _entry(ceiling: dict) -> dict:
    d = _disk()
    return {"device": d["device"], "identity": d["identity"], "identity_weak": False,
            "model": None, "argument": d["data"], "target": d["data"], "target_kind": "file",
            "span_bytes": 256 * 2**20, "engine": "fio", "seconds": 10.0,
            "measured_at": "2026-12-01T02:55:19Z", "measured_at_s": 1796093719.4,
            "tests": {}, "ceiling": ceiling, "notes": []}


def _doc(ceiling: dict | None = None, version=1) -> dict:
    devices = {} if ceiling is None else {_disk()["identity"]: _entry(ceiling)}
    return {"format": FORMAT, "version": version, "devices": devices}


def _valid() -> bytes:
    return json.dumps(_doc(HONEST), indent=1).encode()


# the results files of `file/`: what each holds
FILES = {
    "nested-100000": lambda: (b'{"format": "gpudisk-top probes", "version": 1, "devices": '
                              + b"[" * NESTED + b"]" * NESTED + b"}"),
    "open-brackets-100000": lambda: b"[" * NESTED,
    "over-the-cap": lambda: json.dumps(dict(_doc(HONEST), pad="x" * CAP_BYTES)).encode(),
    "truncated": lambda: _valid()[:len(_valid()) // 2],
    "empty": lambda: b"",
    "future-version": lambda: json.dumps(_doc(HONEST, version=2)).encode(),
    "not-json": lambda: bytes(range(256)) * 16,
    "not-a-results-file": lambda: json.dumps({"format": "something else", "devices": {}}).encode(),
}
# this disk's entry, with one figure that is no ceiling
ENTRIES = {
    "qd32-zero": dict(HONEST, randread_qd32_iops=0),
    "qd1-negative": dict(HONEST, randread_qd1_iops=-5.0),
    "seq-not-a-number": dict(HONEST, seq_read_mib_s="fast"),
    "ceiling-a-list": [1, 2, 3],
}
# stored ceilings the device contradicts, or that no device has
CEILINGS = {
    "control-honest": HONEST,
    "qd32-1": dict(HONEST, randread_qd32_iops=1.0),
    "qd32-100": dict(HONEST, randread_qd32_iops=100.0),
    "seq-0.001": dict(HONEST, seq_read_mib_s=0.001),
    "qd1-above-qd32": dict(HONEST, randread_qd1_iops=4_000_000.0),
    "qd32-1e12": dict(HONEST, randread_qd32_iops=1e12),
}


def _state(ctx: Ctx, body: bytes | None) -> tuple[dict, str]:
    d = ctx.path("state", "gpudisk-top")
    os.makedirs(d)
    path = os.path.join(d, "probes.json")
    if body is not None:
        with open(path, "wb") as f:
            f.write(body)
    return ctx.env(XDG_STATE_HOME=ctx.path("state")), path


def _notes(err: str) -> list[str]:
    """The warning lines that speak of the results file or a probe in it."""
    return [ln for ln in err.splitlines()
            if ln.startswith(WARNING_PREFIX) and ("probes.json" in ln or "probe of" in ln)]


def _said_once(err: str) -> list[str]:
    notes = _notes(err)
    if len(notes) != 1:
        return [f"{len(notes)} warning lines about the results file, not one: {notes[:3]}"]
    return []


# ------------------------------------------------------------------ file/
def file_case(kind: str, which: str):
    def fn(ctx: Ctx) -> Result:
        body = FILES[kind]()
        env, path = _state(ctx, body)
        if which == "once":
            run = ctx.gdt("--once", "--json", "-i", "0.2", env=env, timeout=40)
            return judge(run, lambda: _said_once(run.err)
                         + ([] if parse_json(run.out) else ["stdout is not JSON"]))
        if which == "record":
            rec = ctx.path("r.gdtrec")
            run = ctx.gdt("record", "-o", rec, "-i", "0.2", "--duration", "2", env=env,
                          timeout=40)
            return judge(run, lambda: _said_once(run.err) + (
                [] if os.path.exists(rec) and os.path.getsize(rec) > 0 else ["no recording"]))
        if which == "serve":
            # 25 samples at 0.5 s: the results file is read again at the refresh 10 s in
            run = ctx.gdt("serve", "--listen", "127.0.0.1:0", "-i", "0.5", "--count", "25",
                          env=env, timeout=60)
            return judge(run, lambda: _said_once(run.err))
        if which == "dashboard":
            run, _screen, _ = run_pty(ctx, gdt_argv("-i", "0.5"), quit_after_s=4.0,
                                      env=dict(env, TERM="xterm-256color"))
            return judge(run, lambda: _said_once(run.err))
        # probe: a damaged file is replaced (said once), a newer version's is refused
        run = ctx.gdt("probe", "--engine", "builtin", "--seconds", "1.5", _disk()["data"],
                      env=env, timeout=60)

        def harm() -> list[str]:
            if kind != "future-version":
                return []
            with open(path, "rb") as f:
                return [] if f.read() == body else ["a newer version's results file was replaced"]

        def ok() -> list[str]:
            p = _said_once(run.err)
            with open(path, "rb") as f:
                doc = parse_json(f.read())
            if not (isinstance(doc, dict) and doc.get("format") == FORMAT
                    and _disk()["identity"] in (doc.get("devices") or {})):
                p.append("the probe's result was not kept")
            return p
        return judge(run, ok, harm=harm)
    return fn


# ------------------------------------------------------------------ entry/
def entry_case(kind: str):
    def fn(ctx: Ctx) -> Result:
        env, _path = _state(ctx, json.dumps(_doc(ENTRIES[kind])).encode())
        run = ctx.gdt("--once", "--json", "-i", "0.2", env=env, timeout=40)
        return judge(run, lambda: _said_once(run.err)
                     + ([] if parse_json(run.out) else ["stdout is not JSON"]))
    return fn


# ------------------------------------------------------------------ ceiling/
def _verdict_texts(v: dict) -> list[str]:
    texts = [v.get("reason") or ""]
    for w in v.get("whatif") or []:
        texts += [w.get("basis") or "", w.get("cap") or ""]
    return texts


def ceiling_case(kind: str):
    def fn(ctx: Ctx) -> Result:
        import standin

        if not os.path.exists(JOB):
            return Result("unjudged", "tests/jobs/loader_job.py is missing")
        d = _disk()
        env, _path = _state(ctx, json.dumps(_doc(CEILINGS[kind])).encode())
        progress = ctx.path("progress")
        job = ctx.spawn([PY, JOB, "disk", "--workers", "2", "--seconds", "40", "--data", d["data"],
                         "--progress", progress, "--reads", str(d["reads"])],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(4.0)            # the workers reading, the trainer's progress written
        argv, senv = standin.command(["--once", "--json", "-i", "2"], gpus=1,
                                     processes={0: [job.pid]}, progress=progress,
                                     healthy_steps_s=50.0)
        run = ctx.run(argv, env=dict(env, GDT_STANDIN=senv["GDT_STANDIN"]), timeout=60)
        job.kill()

        def ok():
            doc = parse_json(run.out)
            if not isinstance(doc, dict):
                return ["stdout is not JSON"]
            v = doc.get("verdict") or {}
            disk = next((x for x in doc.get("disks") or [] if x.get("name") == d["device"]), {})
            if v.get("state") != "disk-starved" or not (disk.get("r_s") or 0) > 200:
                return None        # the job was not starved on the disk here: nothing to judge
            text = " | ".join(_verdict_texts(v))
            used = [m for m in PROBE_USED if m in text]
            if kind == "control-honest":
                p = [] if used else [f"the honest probe was not used: {text[:300]}"]
                if IGNORED.search(text):
                    p.append(f"the honest probe was doubted: {text[:300]}")
                return p
            p = [f"a figure from the stored ceiling ({kind}) used: {used}: {text[:400]}"] if used else []
            if not IGNORED.search(text):
                p.append(f"the verdict does not say the probe was ignored: {text[:300]}")
            return p
        return judge(run, ok)
    return fn


# ------------------------------------------------------------------ fio-killed/
def _descendants(pid: int) -> list[int]:
    from proctree import children

    out, todo = [], [pid]
    while todo:
        for c in children(todo.pop()):
            out.append(c)
            todo.append(c)
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def fio_killed(ctx: Ctx) -> Result:
    if not shutil.which("fio"):
        return Result("unjudged", "fio is not installed")
    env, _path = _state(ctx, None)
    t0 = time.monotonic()
    proc = ctx.spawn(gdt_argv("probe", "--engine", "fio", "--seconds", "30", _disk()["data"]),
                     env=env)
    fio: list[int] = []
    while proc.poll() is None and not fio and time.monotonic() - t0 < 30:
        fio = _descendants(proc.pid)
        time.sleep(0.05)
    if not fio:
        return judge(finish(proc, t0), lambda: ["probe ended before fio was seen"])
    time.sleep(1.0)                              # fio's own job processes started
    fio = sorted(set(fio + _descendants(proc.pid)))
    proc.kill()                                  # SIGKILL to probe alone, not its group
    proc.wait(10)
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline and any(_alive(p) for p in fio):
        time.sleep(0.05)
    left = [p for p in fio if _alive(p)]
    for p in left:                               # ours (probe's fio): not left behind
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    took = round(time.monotonic() - t0, 3)
    if left:
        return Result("silent-wrong", f"fio {left} still reading 3 s after probe was killed "
                      "(harm: the device stays loaded)", took, -9, command=" ".join(proc.args))
    return Result("handled", f"fio {fio} gone with probe", took, -9,
                  command=" ".join(proc.args))


def cases() -> list[Case]:
    out = Cases(CAT)
    for kind in FILES:
        for which in ("once", "record"):
            out.add(f"probes/file/{kind}/{which}", f"{which} with a probes.json that is "
                    f"{kind}: one warning, the rest goes on", file_case(kind, which),
                    right="ok", timeout_s=60)
    for kind in ("nested-100000", "truncated", "future-version"):
        out.add(f"probes/file/{kind}/serve", f"serve 12 s with a probes.json that is {kind}: "
                "one warning in all", file_case(kind, "serve"), right="ok", timeout_s=90)
    out.add("probes/file/nested-100000/dashboard", "the dashboard with a probes.json nested "
            "100,000 deep (q after 4 s)", file_case("nested-100000", "dashboard"), right="ok",
            timeout_s=60, solo=True)
    for kind in ("nested-100000", "truncated", "empty"):
        out.add(f"probes/file/{kind}/probe", f"probe with a probes.json that is {kind}: "
                "replaced, said once", file_case(kind, "probe"), right="ok", timeout_s=90)
    out.add("probes/file/future-version/probe", "probe with a newer version's probes.json: "
            "refused, the file kept", file_case("future-version", "probe"), right="refuse",
            timeout_s=90)
    for kind in ENTRIES:
        out.add(f"probes/entry/{kind}", f"--once with this disk's stored ceiling {kind}: one "
                "warning naming the probe", entry_case(kind), right="ok", timeout_s=60)
    for kind in CEILINGS:
        out.add(f"probes/ceiling/{kind}", f"--once on a job starved on the disk, its stored "
                f"ceiling {kind}: " + ("used" if kind == "control-honest" else
                                       "not used, and said"), ceiling_case(kind),
                right="ok", timeout_s=120, solo=True)
    out.add("probes/fio-killed/kill-9", "probe --engine fio killed with SIGKILL: fio gone "
            "within 3 s", fio_killed, right="ok", timeout_s=90, solo=True)
    return out
