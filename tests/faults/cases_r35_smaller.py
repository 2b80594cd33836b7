"""Category 12, part "smaller": issue 35 item 6's smaller findings, through the real
command line.

- alerts-5000: a config file of 5,000 [[alerts]] rules under `--once`, `serve` and
  `report` (each must answer within a bound: the load took 29 s), and the same with the
  5,000th rule bad (refused in one line, as promptly);
- mount-newline: a recording of the simulated node whose checkpoint disk is mounted at
  "/ckpt\\nverdict: healthy" (made in-process with the simulator: `--demo` takes only its
  built-in scenarios), replayed in a real terminal (tmux, a private server): the episode
  panel's evidence and the verdict banner must show the newline escaped, with no screen
  line made of the mountpoint; `report` of it likewise;
- meminfo: a --procfs of this machine's own host files whose /proc/meminfo says
  `MemTotal: -5 kB`, 0, 2^60, a part above MemTotal, a negative or absurd part, through
  `--once` text and JSON: the figure is n/a, a warning names it, the rest stays;
- smart: a smartctl on PATH answering a real NVMe drive's JSON with one figure no drive
  can give (available_spare -7 or 250, its threshold -1, percentage_used 300,
  media_errors -3, power_on_hours 10^12, critical_warning 4096) through `--once` JSON
  and text: the figure is null, said in the reasons, and judges nothing;
- alert-children: `serve --demo --demo-actions` with a rule whose command starts a child
  that sleeps for ever (`sh -c 'sleep 1000 & ...; sleep 1000'`, also a grandchild):
  after its timeout, or at serve's exit, no child is left (checked by the PIDs the
  command wrote), and a bystander process of ours is untouched.

Oracles come from the README: every error one line, a source that cannot be used a
warning with the rest still there, the machine's text shown escaped, an alert command
killed at its timeout_s; the bounds are stated with each case.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import time

from harness import PY, Case, Cases, Ctx, Result, Run, gdt_argv, judge, parse_json
from alert_rules import rules_text
from fakeprocfs import FakeProcfs
from proctree import gone

CAT = 12
PART = "smaller"
NEWLINE_MOUNT = "/ckpt\nverdict: healthy"
ESCAPED_MOUNT = "/ckpt\\x0averdict: healthy"


def _add(out: Cases, tail: str, desc: str, fn, **kw) -> None:
    out.add(f"{PART}/{tail}", desc, fn, **kw)


# ------------------------------------------------------------------ 5,000 alert rules
def many_rules(which: str, bad_last: bool = False):
    bound_s = 8.0

    def fn(ctx: Ctx) -> Result:
        cfg = ctx.path("config.toml")
        text = rules_text(5000, bad_last)
        with open(cfg, "w") as f:
            f.write(text)
        if which == "once":
            run = ctx.gdt("--once", "--demo", "-i", "0.2", "--config", cfg, timeout=90)
        elif which == "serve":
            run = ctx.gdt("serve", "--demo", "--listen", "127.0.0.1:0", "-i", "0.2", "--count",
                          "2", "--config", cfg, timeout=90)
        else:
            from fixtures import demo_recording

            run = ctx.gdt("report", demo_recording(), "--config", cfg, timeout=90)
        line = text.splitlines().index('value = "ninety"') + 1 if bad_last else None

        def ok():
            if bad_last:
                return ["a bad 5,000th rule was accepted"]
            if which == "once" and "verdict:" not in run.out:
                return ["--once printed no verdict"]
            return []
        result = judge(run, ok, bound_s=bound_s, bound_what=f"{which} with 5,000 rules answered")
        if bad_last and result.outcome == "clean-error" and f"line {line}:" not in result.detail:
            result.outcome, result.detail = "silent-wrong", (
                f"the error does not name line {line}: {result.detail}")
        return result
    return fn


# ------------------------------------------------------------------ a newline in a mount
def _newline_recording(ctx: Ctx) -> str:
    """130 s of checkpoint-stalls (two stalls) with its checkpoint disk mounted at
    NEWLINE_MOUNT, recorded as `record` writes (the recorder, the simulator)."""
    from gpudisk_top.collect.source import simulated_source
    from gpudisk_top.record.header import make_header
    from gpudisk_top.record.writer import Recorder
    from gpudisk_top.sim import Simulator
    from gpudisk_top.sim.scenario_toml import loads

    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(here, "gpudisk_top", "sim", "scenarios",
                           "checkpoint-stalls.toml")) as f:
        text = f.read()
    scenario = loads(text.replace('mountpoint = "/checkpoints"',
                                  'mountpoint = ' + json.dumps(NEWLINE_MOUNT)))
    path = ctx.path("ckpt.gdtrec")
    sim = Simulator(scenario, seed=0)
    rec = Recorder(path, make_header(simulated_source("checkpoint-stalls", 0), 1.0))
    for _ in range(130):
        rec.append(sim.sample())
    rec.close("matrix")
    return path


class _Tmux:
    """One command in a tmux session of a private server (its socket in the case's
    directory), stderr and exit status to files."""

    def __init__(self, ctx: Ctx, argv: list[str], cols: int = 120, rows: int = 40) -> None:
        self.ctx = ctx
        self.sock = ctx.path("tmux.sock")
        self.err, self.rc = ctx.path("stderr"), ctx.path("rc")
        env = ctx.env(TERM="xterm-256color")
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()
                           if k in ("PYTHONPATH", "HOME", "XDG_CONFIG_HOME", "LC_ALL", "PATH",
                                    "TERM", "PYTHONDONTWRITEBYTECODE"))
        command = (f"unset COLUMNS LINES; env {exports} {shlex.join(argv)} 2>{self.err}; "
                   f"echo $? > {self.rc}; sleep 60")
        self.argv = argv
        self.t0 = time.monotonic()
        subprocess.run(["tmux", "-S", self.sock, "new-session", "-d", "-x", str(cols), "-y",
                        str(rows), command], check=True, env=env)
        subprocess.run(["tmux", "-S", self.sock, "set-option", "-g", "window-size", "manual"],
                       capture_output=True)

    def screen(self) -> str:
        return subprocess.run(["tmux", "-S", self.sock, "capture-pane", "-p"],
                              capture_output=True, text=True).stdout

    def wait_for(self, needle: str, timeout_s: float) -> str | None:
        deadline = min(time.monotonic() + timeout_s, self.ctx.deadline - 5)
        while time.monotonic() < deadline:
            text = self.screen()
            if needle in text:
                return text
            if os.path.exists(self.rc):
                return None
            time.sleep(0.2)
        return None

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "-S", self.sock, "send-keys", *keys], capture_output=True)

    def finish(self, screen: str, note: str = "") -> Run:
        """Quit (q, q) and wait for the exit status; the Run holds the screen as out."""
        self.keys("q")
        time.sleep(0.3)
        self.keys("q")
        deadline = min(time.monotonic() + 15, self.ctx.deadline - 1)
        while not os.path.exists(self.rc) and time.monotonic() < deadline:
            time.sleep(0.1)
        rc = None
        if os.path.exists(self.rc):
            with open(self.rc) as f:
                rc = int(f.read().strip() or "-1")
        err = open(self.err, errors="replace").read() if os.path.exists(self.err) else ""
        subprocess.run(["tmux", "-S", self.sock, "kill-server"], capture_output=True)
        return Run(self.argv, rc, screen, err, time.monotonic() - self.t0, rc is None,
                   note or ("" if rc is not None else "did not quit on q"))


def _made_up_lines(screen: str) -> list[str]:
    """A screen line (its frame stripped) that starts with the mountpoint's second half:
    the newline was taken for a line break."""
    p = []
    for line in screen.splitlines():
        inner = line.strip(" │╭╮╰╯─▊▎┃")
        if inner.startswith("verdict: healthy"):
            p.append(f"a screen line made of the mountpoint: {line.strip()[:100]!r}")
    return p


def replay_screen(which: str):
    def fn(ctx: Ctx) -> Result:
        if shutil.which("tmux") is None:
            return Result("unjudged", "tmux is not installed")
        rec = _newline_recording(ctx)
        # wide enough that the banner keeps the clause naming the mountpoint
        t = _Tmux(ctx, gdt_argv("replay", rec), cols=120 if which == "episodes" else 250)
        if t.wait_for("REPLAY", 30) is None:
            drawn = t.screen()
            return judge(t.finish(drawn), lambda: ["the replay never drew its screen: "
                                                   + " ".join(drawn.split())[:200]])
        if which == "episodes":
            t.keys("e")
            screen = t.wait_for("episode #", 15)
        else:
            t.keys("n")                            # to the first episode: the banner says it
            screen = t.wait_for("CHECKPOINT-STALL", 15)
        screen = screen if screen is not None else t.screen()
        run = t.finish(screen)

        def ok():
            p = _made_up_lines(screen)
            lines = screen.splitlines()
            if which == "banner":
                # the banner: the lines between the header and the GPU panel's title (the
                # disk table shows the mountpoint too, and must not answer for it)
                end = next((i for i, ln in enumerate(lines) if "GPUs (" in ln), len(lines))
                lines = lines[1:end]
            flat = " ".join(" ".join(lines).split())
            if which == "episodes" and "episode #" not in screen:
                p.append("the episode list never showed")
            elif which == "banner" and "CHECKPOINT-STALL" not in screen:
                p.append("the banner never showed the checkpoint-stall")
            # the evidence and the banner name the mountpoint: shown escaped, as every
            # surface shows the machine's text (README: text from the machine is data)
            if not p and "/ckpt\\x0a" not in flat:
                p.append(f"the {which} does not show the mountpoint escaped ('/ckpt\\x0a...'): "
                         + ("shown as '/ckpt verdict'" if "/ckpt verdict" in flat
                            else "not shown at all"))
            return p
        return judge(run, ok)
    return fn


def report_newline(ctx: Ctx) -> Result:
    rec = _newline_recording(ctx)
    run = ctx.gdt("report", rec, timeout=60)

    def ok():
        p = _made_up_lines(run.out)
        if ESCAPED_MOUNT not in run.out:
            p.append("the mountpoint is not in the report, escaped")
        return p
    return judge(run, ok)


# ------------------------------------------------------------------ meminfo
def _host_procfs(ctx: Ctx) -> str:
    """A --procfs of this machine's own host files (no process: the host line is the
    point)."""
    return str(FakeProcfs(ctx.path("proc")).copy(
        "stat", "meminfo", "pressure/io", "pressure/cpu", "pressure/memory", "self/cgroup",
        "self/mountinfo", "1/mountinfo", "diskstats"))


# meminfo name -> --once JSON's host key
MEM_KEYS = {"MemTotal": "mem_total_kb", "MemAvailable": "mem_available_kb", "Cached": "cached_kb",
            "Buffers": "buffers_kb", "Dirty": "dirty_kb", "Writeback": "writeback_kb"}


def meminfo_case(field: str, value: str, fmt: str):
    def fn(ctx: Ctx) -> Result:
        root = _host_procfs(ctx)
        path = os.path.join(root, "meminfo")
        with open(path) as f:
            lines = f.read().splitlines()
        real = {ln.split(":")[0]: int(ln.split()[1]) for ln in lines if ln.endswith(" kB")}
        total = real["MemTotal"]
        want = str(total * 2) if value == "above-total" else value
        lines = [f"{field}:       {want} kB" if ln.split(":")[0] == field else ln for ln in lines]
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        args = ["--once", "-i", "0.2", "--procfs", root] + (["--json"] if fmt == "json" else [])
        run = ctx.gdt(*args, timeout=30)

        def ok():
            p = []
            said = [ln for ln in run.err.splitlines() if "warning:" in ln and field in ln]
            if not said:
                p.append(f"no warning names {field} {want} kB")
            if fmt == "json":
                doc = parse_json(run.out)
                if not isinstance(doc, dict):
                    return ["stdout is not JSON"]
                host = doc.get("host") or {}
                if host.get(MEM_KEYS[field]) is not None:
                    p.append(f"{MEM_KEYS[field]} is {host.get(MEM_KEYS[field])}, not null")
                for other, key in MEM_KEYS.items():
                    # every other figure still there (MemTotal's parts are judged against
                    # the real total, which stays)
                    if other != field and other in real and host.get(key) is None \
                            and field != "MemTotal":
                        p.append(f"{key} lost with it")
                if not any(field in w for w in doc.get("warnings", [])):
                    p.append("the JSON's warnings do not name it")
            else:
                mem = next((ln for ln in run.out.splitlines() if ln.startswith("memory:")), "")
                if not mem:
                    p.append("no memory line")
                elif field == "MemTotal" and not mem.startswith("memory: total n/a"):
                    p.append(f"the memory line shows a total: {mem[:80]!r}")
                elif "-" in mem.replace("n/a", ""):
                    p.append(f"a negative figure on the memory line: {mem[:80]!r}")
            return p
        return judge(run, ok)
    return fn


# ------------------------------------------------------------------ SMART
SMART = {  # case -> (SMART / Health log field, value, --once JSON field)
    "spare-minus-7": ("available_spare", -7, "available_spare_pct"),
    "spare-250": ("available_spare", 250, "available_spare_pct"),
    "spare-threshold-minus-1": ("available_spare_threshold", -1,
                                "available_spare_threshold_pct"),
    "used-300": ("percentage_used", 300, "percentage_used_pct"),
    "media-errors-minus-3": ("media_errors", -3, "media_errors"),
    "power-on-1e12-h": ("power_on_hours", 10**12, "power_on_hours"),
    "critical-warning-4096": ("critical_warning", 4096, "critical_warning"),
}


def smart_case(kind: str, fmt: str):
    def fn(ctx: Ctx) -> Result:
        from pathlib import Path

        from test_health_live import host_sysfs

        field, value, key = SMART[kind]
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        with open(os.path.join(here, "fixtures", "health", "nvme-7.1-healthy.json")) as f:
            doc = json.load(f)
        doc["nvme_smart_health_information_log"][field] = value
        if field == "power_on_hours":
            doc["power_on_time"]["hours"] = value       # smartctl's own key, read first
        answer = ctx.path("answer.json")
        with open(answer, "w") as f:
            json.dump(doc, f)
        bindir = ctx.path("bin")
        os.mkdir(bindir)
        with open(os.path.join(bindir, "smartctl"), "w") as f:
            f.write(f"#!/bin/sh\ncat {shlex.quote(answer)}\n")
        os.chmod(os.path.join(bindir, "smartctl"), 0o755)
        sysfs = str(host_sysfs(Path(ctx.dir)))
        env = ctx.env(PATH=f"{bindir}:{os.environ.get('PATH', '')}")
        args = ["--once", "-i", "1", "--sysfs", sysfs] + (["--json"] if fmt == "json" else [])
        run = ctx.gdt(*args, env=env, timeout=40)

        def ok():
            if fmt == "json":
                doc_out = parse_json(run.out)
                if not isinstance(doc_out, dict):
                    return ["stdout is not JSON"]
                nvme = next((h for h in doc_out.get("health") or [] if h.get("device") == "nvme0n1"),
                            None)
                if nvme is None:
                    return ["no health reading of nvme0n1"]
                p = []
                if nvme.get(key) is not None:
                    p.append(f"{key} shown as {nvme.get(key)}")
                if nvme.get("status") != "ok":
                    # the real drive's JSON is a healthy drive's: only the impossible
                    # figure could judge it otherwise
                    p.append(f"judged {nvme.get('status')}: {nvme.get('reasons')}")
                if not any(key in r for r in nvme.get("reasons") or []):
                    p.append("the reasons do not say the figure was left out")
                return p
            lines = run.out.splitlines()
            head = next((i for i, ln in enumerate(lines) if ln.startswith("Device  health")), None)
            if head is None:
                return ["no health table"]
            row = next((ln for ln in lines[head:] if ln.startswith("nvme0n1 ")), "")
            cells, columns = row.split(), lines[head].replace(" C ", " ").split()  # "temp C"
            spare = cells[columns.index("spare%")] if len(cells) > columns.index("spare%") else ""
            if spare != "-":
                return [f"the spare% column shows {spare!r}: {row[:120]!r}"]
            if cells[1:2] != ["ok"]:
                return [f"the drive is judged {cells[1:2]}: {row[:120]!r}"]
            if "impossible" not in row:
                return [f"the row does not say the figure was left out: {row[:160]!r}"]
            return []
        return judge(run, ok)
    return fn


# ------------------------------------------------------------------ alert command children
def _is_our_sleeper(pid: int) -> bool:
    """pid runs `sleep 1000` (what the case's command started) and is not a zombie."""
    if gone(pid):
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read() == b"sleep\x001000\x00"
    except OSError:
        return False


def alert_children(kind: str):
    def fn(ctx: Ctx) -> Result:
        pidfile = ctx.path("children.pid")
        if kind == "grandchild":
            script = (f"sh -c 'sleep 1000 & echo $! >> {pidfile}; wait' & "
                      f"echo $! >> {pidfile}; sleep 1000")
        else:
            script = f"sleep 1000 & echo $! >> {pidfile}; sleep 1000"
        timeout_s, count = ("60", "6") if kind == "at-exit" else ("1", "16")
        cfg = ctx.path("config.toml")
        with open(cfg, "w") as f:
            f.write("[[alerts]]\nname = \"forever\"\nmetric = \"disk_util_pct\"\nop = \">=\"\n"
                    "value = 0\ndevice = \"nvme0n1\"\nfor_samples = 1\n"
                    f"command = {json.dumps(['sh', '-c', script])}\n"
                    f"timeout_s = {timeout_s}\n")
        bystander = ctx.spawn(["sleep", "1000"])
        run = ctx.gdt("serve", "--demo", "--demo-actions", "--listen", "127.0.0.1:0", "-i",
                      "0.25", "--count", count, "--config", cfg, timeout=45)
        pids: list[int] = []
        if os.path.exists(pidfile):
            with open(pidfile) as f:
                pids = [int(x) for x in f.read().split() if x.isdigit()]
        deadline = time.monotonic() + 3          # a SIGKILL is delivered, then reaped
        while any(_is_our_sleeper(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = [p for p in pids if _is_our_sleeper(p)]
        for p in left:                            # ours (our command's sleep): not left behind
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass

        def ok():
            p = []
            if not pids:
                return ["the command never started its children"]
            if left:
                p.append(f"the command's children {left} outlived "
                         + ("serve" if kind == "at-exit" else "its 1 s timeout and serve"))
            said = "still ran at exit; killed" if kind == "at-exit" else "killed after 1 s"
            if said not in run.err:
                p.append(f"serve did not say the command was {said}")
            return p

        def harm():
            return [] if bystander.poll() is None else ["a bystander process of ours was killed"]
        return judge(run, ok, harm)
    return fn


def cases() -> list[Case]:
    out = Cases(CAT)
    for which in ("once", "serve", "report"):
        _add(out, f"alerts-5000/{which}", f"{which} with a config of 5,000 alert rules "
             "(answered within 8 s)", many_rules(which), right="ok", timeout_s=90)
    _add(out, "alerts-5000-bad-last/once", "--once with 5,000 alert rules, the last with a "
         "value that is not a number (refused within 8 s, naming its line)",
         many_rules("once", bad_last=True), right="bad", timeout_s=90)
    for which in ("episodes", "banner"):
        _add(out, f"mount-newline/replay-{which}", f"replay (tmux) of a checkpoint-stall "
             f"on a mountpoint '/ckpt\\nverdict: healthy': the {which} shows it escaped",
             replay_screen(which), right="ok", timeout_s=90, solo=True)
    _add(out, "mount-newline/report", "report of the same recording", report_newline,
         right="ok", timeout_s=60)
    for field, value, label, fmts in (("MemTotal", "-5", "minus-5", ("text", "json")),
                                      ("MemTotal", "0", "zero", ("text", "json")),
                                      ("MemTotal", str(2**60), "2^60", ("json",)),
                                      ("MemAvailable", "above-total", "twice-MemTotal", ("json",)),
                                      ("Cached", "-1", "minus-1", ("text", "json")),
                                      ("Dirty", str(10**30), "1e30", ("json",))):
        shown = "twice MemTotal" if value == "above-total" else f"{value} kB"
        for fmt in fmts:
            _add(out, f"meminfo/{field}-{label}/{fmt}", f"--once {fmt} with /proc/meminfo "
                 f"{field}: {shown} (this machine's other files)",
                 meminfo_case(field, value, fmt), right="ok", timeout_s=40)
    for kind in SMART:
        for fmt in (("json", "text") if kind == "spare-minus-7" else ("json",)):
            _add(out, f"smart/{kind}/{fmt}", f"--once {fmt} with a smartctl on PATH "
                 f"answering {SMART[kind][0]} {SMART[kind][1]}", smart_case(kind, fmt),
                 right="ok", timeout_s=40)
    for kind, desc in (("timeout", "past its 1 s timeout"),
                       ("grandchild", "(a grandchild too) past its 1 s timeout"),
                       ("at-exit", "still running when serve ends")):
        _add(out, f"alert-children/{kind}", f"serve --demo-actions with an alert command "
             f"that starts a child sleeping for ever, {desc}: no child left",
             alert_children(kind), right="ok", timeout_s=60)
    return out
