"""Category 2: alert actions, through `serve` (the real command line) with config rules.

Live runs use stand-in GPUs (tests/standin.py) whose compute processes are real processes
of ours ("jobs", which log every signal they get); a "bystander" process of ours is never
a GPU process and must never be signalled.  Each rule's command is a small recorder that
logs its argv and GDT_ALERT_* environment and, like kill, sends SIGUSR1 to every numeric
argument, so a wrong {pids} shows up as a signal to the wrong process.  Oracles: which
commands ran, with which PIDs, who got a signal, what the touch/log files hold and their
modes, how many warning lines a repeated problem costs.
"""

from __future__ import annotations

import json
import os
import re
import stat
import time

import standin
from harness import (HANDLED, NOBODY, PY, Case, Cases, Ctx, Result, gdt_argv, judge, lstat_sig,
                     mode_of, same_node)
from fakeprocfs import FakeProcfs

CAT = 2

JOB = r"""
import os, signal, sys, time
log = sys.argv[1]
def on(sig, _):
    with open(log, "a") as f:
        f.write(signal.Signals(sig).name + "\n")
for s in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP, signal.SIGINT):
    signal.signal(s, on)
open(log + ".ready", "w").write(str(os.getpid()))
time.sleep(120)
"""

REC = r"""
import json, os, signal, sys, time
out, sleep_s, rest = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
env = {k: v for k, v in os.environ.items() if k.startswith("GDT_ALERT_")}
with open(out, "a") as f:
    f.write(json.dumps({"args": rest, "pid": os.getpid(), "env": env}) + "\n")
for a in rest[1:]:
    if a.isdigit():
        try:
            os.kill(int(a), signal.SIGUSR1)
        except OSError:
            pass
time.sleep(sleep_s)
"""


def _scripts(ctx: Ctx) -> tuple[str, str]:
    job, rec = ctx.path("job.py"), ctx.path("rec.py")
    with open(job, "w") as f:
        f.write(JOB)
    with open(rec, "w") as f:
        f.write(REC)
    return job, rec


def start_job(ctx: Ctx, name: str) -> tuple[int, str]:
    """A process of ours that logs the signals it gets; (pid, its log)."""
    log = ctx.path(f"{name}.signals")
    open(log, "w").close()
    proc = ctx.spawn([PY, ctx.path("job.py"), log])
    deadline = time.monotonic() + 10
    while not os.path.exists(log + ".ready") and time.monotonic() < deadline:
        time.sleep(0.02)
    return proc.pid, log


def signals(log: str) -> list[str]:
    try:
        with open(log) as f:
            return f.read().split()
    except OSError:
        return []


def invocations(path: str) -> list[dict]:
    try:
        with open(path) as f:
            return [json.loads(x) for x in f if x.strip()]
    except OSError:
        return []


FIRED_RE = re.compile(r"^\S+ gpudisk-top alert ([\w.:-]+): (GPU \d+|\S+)")


def fired(err: str) -> list[tuple[str, str]]:
    return [m.groups() for m in map(FIRED_RE.match, err.splitlines()) if m]


def q(s: str) -> str:
    return json.dumps(s)


def cmd(rec: str, out: str, *args: str, sleep_s: float = 0.0) -> str:
    return "[" + ", ".join(q(a) for a in (PY, rec, out, str(sleep_s), *args)) + "]"


def diskstats_procfs(ctx: Ctx, n: int) -> str:
    """A procfs of copies (stat, meminfo) with n NVMe devices in its diskstats."""
    procfs = FakeProcfs(ctx.path("proc")).copy("stat", "meminfo")
    procfs.write("diskstats", [f" 259 {i:7d} nvme{i}n1 100 0 800 10 0 0 0 0 0 10 10 0 0 0 0 0 0"
                               for i in range(n)])
    return str(procfs)


class World:
    """The processes and files one alert case runs with."""

    def __init__(self, ctx: Ctx) -> None:
        self.ctx = ctx
        self.job_py, self.rec_py = _scripts(ctx)
        self.out = ctx.path("ran.jsonl")
        self.bystander, self.bystander_log = start_job(ctx, "bystander")
        self.jobs: dict[int, tuple[int, str]] = {}

    def job(self, gpu: int) -> int:
        pid, log = start_job(self.ctx, f"job{gpu}")
        self.jobs[gpu] = (pid, log)
        return pid

    def cmd(self, *args: str, sleep_s: float = 0.0) -> str:
        return cmd(self.rec_py, self.out, *args, sleep_s=sleep_s)

    def harm(self) -> list[str]:
        got = signals(self.bystander_log)
        return [f"the bystander (pid {self.bystander}, no GPU process) got {got}"] if got else []


def serve_argv(cfg: str, source: str, n: int = 8, interval: str = "0.25", extra=()) -> list[str]:
    args = ["serve", "--listen", "127.0.0.1:0", "-i", interval, "--count", str(n), "--config", cfg,
            *extra]
    if source.startswith("demo"):
        args += ["--demo"] + (["--demo-actions"] if source == "demo-actions" else [])
    return args


def run_serve(ctx: Ctx, w: World, rules: str, source: str = "standin", gpus: int = 2,
              n: int = 8, interval: str = "0.25", extra=(), umask=None, timeout=40):
    cfg = ctx.path("config.toml")
    with open(cfg, "w") as f:
        f.write(rules)
    argv = serve_argv(cfg, source, n, interval, extra)
    if source == "standin":
        processes = {g: [pid] for g, (pid, _) in w.jobs.items()}
        command, env = standin.command(argv, gpus=gpus, processes=processes)
        return ctx.run(command, env=ctx.env(GDT_STANDIN=env["GDT_STANDIN"]), timeout=timeout,
                       umask=umask)
    return ctx.run(gdt_argv(*argv), timeout=timeout, umask=umask)


def rule(name: str, cond: str, *actions: str, for_samples: int = 1, cooldown=None) -> str:
    lines = ["[[alerts]]", f"name = {q(name)}", cond.strip(), f"for_samples = {for_samples}"]
    if cooldown is not None:
        lines.append(f"cooldown_s = {cooldown}")
    lines += [a for a in actions if a]
    return "\n".join(lines) + "\n\n"


# ------------------------------------------------------------------------ pids cases
def pids_case(what: str):
    """Who a command's {pids} names, and who gets the signal."""
    def fn(ctx: Ctx) -> Result:
        w = World(ctx)
        w.job(0)
        jobs_on = {0}
        if what in ("gpu-all", "free-space-two-jobs", "disk-with-users-two-jobs"):
            w.job(1)
            jobs_on = {0, 1}
        if what.endswith("no-processes"):
            w.jobs.clear()
            jobs_on = set()
        conds = {
            "disk-with-users": 'metric = "disk_util_pct"\nop = ">="\nvalue = 0\ndevice = "vda"',
            "disk-with-users-two-jobs": 'metric = "disk_util_pct"\nop = ">="\nvalue = 0\ndevice = "vda"',
            "disk-without-users": 'metric = "disk_util_pct"\nop = ">="\nvalue = 0\ndevice = "zram0"',
            "disk-any": 'metric = "disk_util_pct"\nop = ">="\nvalue = 0',
            "gpu0": 'metric = "gpu_util_pct"\nop = ">="\nvalue = 0\ngpu = [0]',
            "gpu1-idle": 'metric = "gpu_util_pct"\nop = ">="\nvalue = 0\ngpu = [1]',
            "gpu-all": 'metric = "gpu_util_pct"\nop = ">="\nvalue = 0',
            "verdict-with-processes": 'verdict = ["starved"]',
            "verdict-idle-no-processes": 'verdict = ["idle"]',
            "free-space": f'free_space = {q(ctx.dir)}\nbelow_pct = 100',
            "free-space-two-jobs": f'free_space = {q(ctx.dir)}\nbelow_pct = 100',
            "free-space-no-processes": f'free_space = {q(ctx.dir)}\nbelow_pct = 100',
            "host": 'metric = "host_cpu_idle_pct"\nop = ">="\nvalue = 0',
        }
        rules = rule("r", conds[what], f"command = {w.cmd('{subject}', '{pids}')}")
        run = run_serve(ctx, w, rules)
        ran = invocations(w.out)
        fires = [s for r, s in fired(run.err) if r == "r"]

        def key_of_fire(subject: str) -> tuple[str, str]:
            if subject.startswith("GPU "):
                return ("gpu", subject.split()[1])
            if re.match(r"^(vda|zram\d+|loop\d+)$", subject):
                return ("disk", subject)
            return ("node", "")

        def key_of_run(inv: dict) -> tuple[str, str]:
            env = inv["env"]
            if env.get("GDT_ALERT_KIND") != "metric":
                return ("node", "")
            if env.get("GDT_ALERT_DEVICE"):
                return ("disk", env["GDT_ALERT_DEVICE"])
            if env.get("GDT_ALERT_GPU"):
                return ("gpu", env["GDT_ALERT_GPU"])
            return ("node", "")

        def concerned(key: tuple[str, str]) -> set[int]:
            """The PIDs the README says the command gets for this subject."""
            kind, name = key
            if kind == "disk":
                return {w.jobs[g][0] for g in jobs_on} if name == "vda" else set()
            if kind == "gpu":
                return {w.jobs[int(name)][0]} if int(name) in w.jobs else set()
            return {w.jobs[g][0] for g in jobs_on}

        def ok():
            p = []
            if not fires:
                return ["the rule never fired"]
            keys = [key_of_fire(s) for s in fires]
            by_key: dict = {}
            for inv in ran:
                by_key.setdefault(key_of_run(inv), []).append(inv)
            for key in set(keys):
                want = concerned(key)
                got = by_key.get(key, [])
                label = "/".join(x for x in key if x)
                if want:
                    if len(got) != 1:
                        p.append(f"{label}: {len(got)} commands ran, expected 1")
                    elif {int(x) for x in got[0]["args"][1:]} != want:
                        p.append(f"{label}: {{pids}} gave {got[0]['args'][1:]}, expected {sorted(want)}")
                else:
                    if got:
                        p.append(f"{label}: nobody concerned, yet the command ran with {got[0]['args'][1:]}")
                    elif "not run" not in run.err:
                        p.append(f"{label}: not run, and not said")
            for key in set(by_key) - set(keys):
                p.append(f"a command ran for {key}, which did not fire")
            for g, (pid, log) in w.jobs.items():
                should = any(pid in concerned(k) for k in keys)
                got_sig = "SIGUSR1" in signals(log)
                if should and not got_sig:
                    p.append(f"job on GPU {g} not signalled")
                if got_sig and not should:
                    p.append(f"job on GPU {g} signalled though not concerned")
            return p

        return judge(run, ok, w.harm)
    return fn


# ------------------------------------------------------------------------ --demo
def demo_case(kind: str, actions: bool):
    def fn(ctx: Ctx) -> Result:
        w = World(ctx)
        touch, log = ctx.path("PAUSE"), ctx.path("alerts.log")
        conds = {"disk": 'metric = "disk_util_pct"\nop = ">="\nvalue = 0',
                 "gpu": 'metric = "gpu_util_pct"\nop = ">="\nvalue = 0',
                 "verdict": 'verdict = ["starved", "healthy", "idle"]',
                 "free-space": f'free_space = {q(ctx.dir)}\nbelow_pct = 100'}
        rules = (rule("withpids", conds[kind], f"command = {w.cmd('{subject}', '{pids}')}",
                      f"touch = {q(touch)}")
                 + rule("nopids", conds[kind], f"command = {w.cmd('{subject}')}",
                        f"log = {q(log)}"))
        run = run_serve(ctx, w, rules, source="demo-actions" if actions else "demo", n=6)
        ran = invocations(w.out)

        def ok():
            p = []
            if actions:
                if any(len(i["args"]) > 1 for i in ran):
                    p.append(f"a command got PIDs on simulated data: {ran[0]['args']}")
                if not any(i["args"] and len(i["args"]) == 1 for i in ran):
                    p.append("--demo-actions: the command without {pids} never ran")
                if os.path.exists(touch):
                    try:
                        doc = json.load(open(touch))
                        if doc.get("pids") not in ("", None, []):
                            p.append(f"touch file names PIDs: {doc.get('pids')}")
                    except ValueError:
                        p.append("the touch file is not JSON")
                else:
                    p.append("--demo-actions: no touch file")
                if not os.path.exists(log):
                    p.append("--demo-actions: no log file")
            else:
                if ran:
                    p.append(f"{len(ran)} commands ran on simulated data")
                for f in (touch, log):
                    if os.path.exists(f):
                        p.append(f"{os.path.basename(f)} written on simulated data")
                if "--demo-actions" not in run.err:
                    p.append("did not say that nothing real happens under --demo")
            return p

        return judge(run, ok, w.harm)
    return fn


# ------------------------------------------------------------------------ many at once
def many_case(n: int, source: str, sleep_s: float):
    def fn(ctx: Ctx) -> Result:
        w = World(ctx)
        extra = ()
        if source == "procfs":
            extra = ("--procfs", diskstats_procfs(ctx, n), "-a")
        rules = rule("many", 'metric = "disk_util_pct"\nop = ">="\nvalue = 0',
                     f"command = {w.cmd('{device}', sleep_s=sleep_s)}", "log = \"stderr\"")
        run = run_serve(ctx, w, rules, source="demo-actions" if source == "demo" else "live",
                        n=6, extra=extra)
        ran = invocations(w.out)
        fires = [s for r, s in fired(run.err) if r == "many"]

        def ok():
            p = []
            if source == "procfs" and len(set(fires)) != n:
                p.append(f"{len(set(fires))} devices fired, expected {n}")
            if source == "demo" and len(set(fires)) < 16:
                p.append(f"{len(set(fires))} of the demo's 16 disks fired")
            got = [i["args"][0] for i in ran]
            dup = {d for d in got if got.count(d) > 1}
            if dup:
                p.append(f"commands ran twice for {sorted(dup)[:5]}")
            said_lines = [x for x in run.err.splitlines()
                          if x.startswith("gpudisk-top: warning:") and ("not run" in x or "waiting" in x)]
            said = " ".join(said_lines)
            counted = sum(int(m) for m in re.findall(r"and (\d+) more like it", said))
            counted += sum(int(m) for m in re.findall(r"(\d+) commands? still waiting", said))
            missing = sorted(d for d in set(fires) if d not in got)
            unsaid = [d for d in missing if d not in said]
            if counted >= len(unsaid):
                unsaid = []
            if unsaid:
                p.append(f"{len(unsaid)} of {len(set(fires))} fired devices never ran their "
                         f"command and nothing said so (e.g. {unsaid[:3]})")
            if missing and not unsaid:
                run.note = f"{len(missing)} commands still waiting at exit, said so"
            return p

        return judge(run, ok, w.harm)
    return fn


# ------------------------------------------------------------------------ touch / log paths
def _mk(ctx: Ctx, kind: str):
    """(path, keep: [(path, lstat)], keep_bytes: [(path, bytes)], absent, right)"""
    p = ctx.path("target")
    keep, keep_b, absent = [], [], []
    right = "write"
    if kind == "new":
        pass
    elif kind == "existing":
        open(p, "w").write("old\n")
        os.chmod(p, 0o600)
    elif kind == "own-link":
        real = ctx.path("real")
        open(real, "w").write("old\n")
        os.symlink(real, p)
        keep.append((p, lstat_sig(p)))
    elif kind == "other-users-link":
        victim = ctx.path("victim")
        open(victim, "w").write("root:x:0\n")
        os.symlink(victim, p)
        os.lchown(p, NOBODY, NOBODY)
        keep.append((p, lstat_sig(p)))
        keep_b.append((victim, b"root:x:0\n"))
        right = "refuse"
    elif kind == "dangling-link":
        os.symlink(ctx.path("nowhere"), p)
        absent.append(ctx.path("nowhere"))
        right = "refuse"
    elif kind == "directory":
        os.mkdir(p)
        keep.append((p, lstat_sig(p)))
        right = "refuse"
    elif kind == "no-parent":
        p = ctx.path("no", "such", "target")
        absent.append(ctx.path("no"))
        right = "refuse"
    elif kind == "fifo-no-reader":
        os.mkfifo(p)
        keep.append((p, lstat_sig(p)))
        right = "either"
    elif kind == "chr-null":
        os.mknod(p, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        keep.append((p, lstat_sig(p)))
        right = "in-place"
    elif kind == "chr-full":
        os.mknod(p, stat.S_IFCHR | 0o666, os.makedev(1, 7))
        keep.append((p, lstat_sig(p)))
        right = "refuse"
    elif kind == "readonly-mount":
        mnt = ctx.mount_tmpfs("ro", "1m", "ro")
        p = os.path.join(mnt, "target") if mnt else ctx.path("ro", "target")
        absent.append(p)
        right = "refuse"
    elif kind == "full-disk":
        mnt = ctx.mount_tmpfs("full", "16k")
        p = os.path.join(mnt or ctx.dir, "target")
        try:
            with open(os.path.join(mnt, "filler"), "wb") as f:
                f.write(b"\0" * (1 << 20))
        except (OSError, TypeError):
            pass
        right = "refuse"
    return p, keep, keep_b, absent, right


def action_path_case(action: str, kind: str):
    def fn(ctx: Ctx) -> Result:
        w = World(ctx)
        p, keep, keep_b, absent, right = _mk(ctx, kind)
        rules = (rule("act", 'metric = "disk_util_pct"\nop = ">="\nvalue = 0\ndevice = "nvme0n1"',
                      f"{action} = {q(p)}")
                 + rule("count", 'metric = "disk_util_pct"\nop = ">="\nvalue = 0\ndevice = "nvme0n1"',
                        "log = \"stderr\""))
        run = run_serve(ctx, w, rules, source="demo-actions", n=6, timeout=30)

        def harm():
            out = w.harm()
            for path, sig in keep:
                out += same_node(path, sig)
            for path, content in keep_b:
                try:
                    if open(path, "rb").read() != content:
                        out.append(f"{os.path.basename(path)} was written through")
                except OSError:
                    out.append(f"{os.path.basename(path)} is gone")
            for path in absent:
                if os.path.lexists(path):
                    out.append(f"{path} was created")
            return out

        def ok():
            probs = []
            n_fired = sum(1 for r, _ in fired(run.err) if r == "count")
            if n_fired < 1:
                return ["the rule never fired"]
            if right == "write":
                real = os.path.realpath(p)
                try:
                    text = open(real).read()
                except OSError as err:
                    return [f"{action} file not written: {err.strerror}"]
                if action == "touch":
                    try:
                        doc = json.loads(text)
                        if "nvme0n1" not in json.dumps(doc):
                            probs.append("the touch file does not name the device")
                    except ValueError:
                        probs.append("the touch file is not JSON")
                else:
                    lines = [x for x in text.splitlines() if "act" in x]
                    if len(lines) < n_fired:
                        probs.append(f"log holds {len(lines)} alert lines, {n_fired} fired")
                if kind == "existing" and mode_of(real) != 0o600:
                    probs.append(f"mode of an existing file changed to {oct(mode_of(real))}")
            elif right == "refuse":
                if not any(x.startswith("gpudisk-top: warning: alert act") for x in run.err.splitlines()):
                    probs.append(f"the {action} problem was not said")
            return probs

        return judge(run, ok, harm, bound_s=25)
    return fn


def umask_case(umask: int):
    def fn(ctx: Ctx) -> Result:
        w = World(ctx)
        touch, log = ctx.path("PAUSE"), ctx.path("alerts.log")
        rules = rule("u", 'metric = "disk_util_pct"\nop = ">="\nvalue = 0\ndevice = "nvme0n1"',
                     f"touch = {q(touch)}", f"log = {q(log)}")
        run = run_serve(ctx, w, rules, source="demo-actions", n=4, umask=umask)

        def ok():
            want = 0o666 & ~umask
            p = []
            for f in (touch, log):
                m = mode_of(f)
                if m is None:
                    p.append(f"{os.path.basename(f)} not written")
                elif m != want:
                    p.append(f"{os.path.basename(f)} mode {oct(m)}, expected {oct(want)} (umask {umask:03o})")
            return p

        return judge(run, ok, w.harm)
    return fn


def flood_case(nrules: int):
    """Rules whose commands cannot run, firing every sample: a warning a minute per rule."""
    def fn(ctx: Ctx) -> Result:
        w = World(ctx)
        rules = "".join(rule(f"r{i}", 'metric = "disk_util_pct"\nop = ">="\nvalue = 0\ndevice = "nvme0n1"',
                             f'command = ["/nonexistent/notify-{i}"]', "log = false", cooldown=0)
                        for i in range(nrules))
        run = run_serve(ctx, w, rules, source="demo-actions", n=100, interval="0.05")

        def ok():
            warn = [x for x in run.err.splitlines() if x.startswith("gpudisk-top: warning:")
                    and "notify" in x]
            if len(warn) > 2 * nrules:
                return [f"{len(warn)} warning lines for {nrules} failing rules in "
                        f"{run.took_s:.0f} s"]
            if not warn:
                return ["the failing command was never said"]
            return []

        return judge(run, ok, w.harm)
    return fn


def timeout_case():
    """A command that never ends is killed at its timeout_s and never outlives serve."""
    def fn(ctx: Ctx) -> Result:
        w = World(ctx)
        rules = rule("slow", 'metric = "disk_util_pct"\nop = ">="\nvalue = 0\ndevice = "nvme0n1"',
                     f"command = {w.cmd('{device}', sleep_s=100)}", "timeout_s = 1")
        run = run_serve(ctx, w, rules, source="demo-actions", n=6)
        ran = invocations(w.out)

        def ok():
            p = []
            if not ran:
                return ["the command never ran"]
            for inv in ran:
                if os.path.exists(f"/proc/{inv['pid']}"):
                    try:
                        st = open(f"/proc/{inv['pid']}/cmdline", "rb").read()
                    except OSError:
                        st = b""
                    if b"rec.py" in st:
                        p.append(f"command pid {inv['pid']} still runs after serve ended")
            return p

        return judge(run, ok, w.harm, bound_s=15)
    return fn


def cases() -> list[Case]:
    out = Cases(CAT)
    for what in ("disk-with-users", "disk-with-users-two-jobs", "disk-without-users", "disk-any",
                 "gpu0", "gpu1-idle", "gpu-all", "verdict-with-processes",
                 "verdict-idle-no-processes", "free-space", "free-space-two-jobs",
                 "free-space-no-processes", "host"):
        out.add(f"pids/{what}", f"a rule ({what}) whose command takes {{pids}}",
                pids_case(what), timeout_s=45, expect=HANDLED)
    for kind in ("disk", "gpu", "verdict", "free-space"):
        for actions in (False, True):
            tag = "demo-actions" if actions else "demo"
            out.add(f"{tag}/{kind}", f"--demo{' --demo-actions' if actions else ''}: "
                    f"a {kind} rule with command, touch and log", demo_case(kind, actions),
                    timeout_s=45, expect=HANDLED)
    for n in (1, 4, 16, 64):
        out.add(f"many/{n}-devices", f"{n} devices firing at once (live procfs)",
                many_case(n, "procfs", 0.3), timeout_s=45, expect=HANDLED)
    out.add("many/64-devices-slow-commands", "64 devices firing, commands of 2 s",
            many_case(64, "procfs", 2.0), timeout_s=60, expect=HANDLED)
    out.add("many/demo-16-devices", "--demo --demo-actions: 16 disks firing",
            many_case(16, "demo", 0.3), timeout_s=45, expect=HANDLED)
    for action in ("touch", "log"):
        for kind in ("new", "existing", "own-link", "other-users-link", "dangling-link",
                     "directory", "no-parent", "fifo-no-reader", "chr-null", "chr-full",
                     "readonly-mount", "full-disk"):
            out.add(f"{action}/{kind}", f"an alert's {action} file: {kind}",
                    action_path_case(action, kind), timeout_s=40, expect=HANDLED)
    for umask in (0o000, 0o022, 0o027, 0o077):
        out.add(f"umask/{umask:03o}", f"touch and log files under umask {umask:03o}",
                umask_case(umask), timeout_s=40, expect=HANDLED)
    for n in (1, 4):
        out.add(f"flood/{n}-failing-rules", f"{n} rules whose command cannot run, "
                "firing every sample", flood_case(n), timeout_s=45, expect=HANDLED)
    out.add("command/never-ends", "a command that never ends (timeout_s = 1)",
            timeout_case(), timeout_s=40, expect=HANDLED)
    return out
