"""The alert engine: fed one Model (with its verdict and free space) per sample.

    engine = AlertEngine(rules)
    fired = engine.update(model, verdict, free_space)   # in the sampler thread
    for alert in fired:                                  # the dashboard: banner and bell
        show(alert.message, bell=alert.bell)
    engine.close()

Each rule is judged per subject (a device, a GPU, a path; the node for host metrics and
verdicts; a job for a rule that names jobs, alerts/jobs.py).  A hold is the run of consecutive samples in which the condition is true for
that subject; it fires once, when it reaches for_samples, and the same subject fires again
only `cooldown_s` after its last firing: a new hold that reaches for_samples during the
cooldown fires when the cooldown ends, if it still holds then.  Cooldowns are measured on
the samples' monotonic clock, so a replay or the simulator behaves as a live node does.

The processes an alert gives its command ({pid}, {pids}) are resolved exactly, never
widened: those on the GPU, those whose files live on the device, the verdict's own; every
GPU process only for a rule about the node (a host metric, free space).  None found: a
command that needs them is not run.  On simulated data (--demo) nothing real happens:
no command, no touch, no log file, unless the user asks with demo_actions, and even then
no PIDs (simulated PIDs name nobody here).  Problems with actions are said once a minute
per rule and kind, with a count.
"""

from __future__ import annotations

import socket
import sys
import threading
from dataclasses import dataclass, field

from gpudisk_top.alerts import catalog
from gpudisk_top.alerts.actions import (CommandRunner, append_line, expand_argv, log_line,
                                        needs_pids, write_details)
from gpudisk_top.alerts.jobs import (job_fields, job_gpus, job_of_gpu, job_of_id, job_verdicts,
                                     job_words)
from gpudisk_top.alerts.rules import AlertRule, shell_script_placeholders
from gpudisk_top.deadline import QueueWorker
from gpudisk_top.outfile import OutputError
from gpudisk_top.textsafe import printable
from gpudisk_top.errors import warn as warn_line
from gpudisk_top.collect.blockdev import device_stack
from gpudisk_top.model.vocab import iso_time
from gpudisk_top.ratelimit import OncePer
# free space's GB is decimal, as df -H and below_gb: watch/freespace.py's, the one owner
from gpudisk_top.watch.freespace import GB

FILE_QUEUE = 256       # log lines and touch files waiting for their filesystem
FILE_WAIT_S = 3.0      # what close() gives them


@dataclass(frozen=True)
class Fired:
    """One alert that fired now.  `message` is one line, ready for a banner."""

    rule: str
    kind: str                  # "metric" | "verdict" | "free_space"
    subject: str               # device, GPU index, path; "" for the node
    value: object              # the observed number, or the verdict's state
    message: str
    wall_s: float
    samples: int               # samples the condition has held
    bell: bool = False
    banner: bool = True
    env: dict[str, str] = field(default_factory=dict)   # GDT_ALERT_* as the command gets it


@dataclass
class _Hold:
    count: int = 0
    fired: object = None           # None; True while its actions run; then the Fired


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' * (n != 1)}"


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.2f}".rstrip("0").rstrip(".") if abs(value) < 1000 else f"{value:.0f}"
    return str(value)


@dataclass(frozen=True)
class AlertOptions:
    """What a command asks of the alert engine beyond the config file's rules (built by
    commands/common.py alert_options).  demo_actions: on a simulated source, let rules run
    their commands and write their files (--demo-actions; never with PIDs)."""

    demo_actions: bool = False


class AlertEngine:
    """rules: parsed [[alerts]].  stderr: where `log = "stderr"` lines go (None: nowhere;
    the dashboard shows Fired.message instead).  warn: gets one line per problem with an
    action (a command that failed, a log file that cannot be written); by default they go
    to stderr prefixed "gpudisk-top: warning: ".  source and host_name go to the commands'
    environment."""

    def __init__(self, rules=(), stderr=sys.stderr, warn=None, source: str = "live",
                 host_name: str | None = None, popen=None, demo_actions: bool = False) -> None:
        self.rules: tuple[AlertRule, ...] = tuple(rules)
        self.stderr = stderr
        self.warn = warn if warn is not None else warn_line
        self._say = OncePer(self.warn)
        self.source = source
        self.simulated = source != "live"
        self.real_actions = not self.simulated or demo_actions
        self.host_name = host_name or socket.gethostname()
        self.commands = CommandRunner(self._say, **({"popen": popen} if popen else {}))
        # log and touch files written off the sampling thread: a stalled filesystem under
        # them costs those lines (said once a minute), never the sampling or other alerts
        self._files = QueueWorker(lambda job: job(), "gpudisk-top-alert-files",
                                  FILE_QUEUE, on_error=self._file_failed)
        self._file_errors: list[tuple[str, str]] = []
        self._holds: dict[tuple[str, str], _Hold] = {}
        self._lock = threading.Lock()     # active() may be called from the UI thread
        self._last_fired_mono: dict[tuple[str, str], float] = {}
        self.fired_total: dict[str, int] = {r.name: 0 for r in self.rules}
        for rule in self.rules:           # said at every start, as long as it is allowed
            shell = shell_script_placeholders(rule.command) if rule.allow_shell else None
            if shell is not None:
                words = " ".join(dict.fromkeys("{" + w + "}" for w in shell[1]))
                self.warn(f"alert {rule.name}: allow_shell = true: its command runs "
                          f"{printable(shell[0])} -c with {words} in its script, so text from "
                          "the machine (mount paths, process names) runs as shell code")

    @property
    def paths(self) -> tuple[str, ...]:
        """Paths the free_space rules need read (give their FreeSpace to update())."""
        return tuple(dict.fromkeys(r.free_space for r in self.rules if r.free_space))

    # ------------------------------------------------------------------ per sample
    def update(self, model, verdict=None, free_space=()) -> list[Fired]:
        """Judge every rule on this sample, run the actions of those that fire, and return
        them.  Never raises for a failed action (that is a warning)."""
        self.commands.poll()
        self._say_file_errors()
        if not self.rules:
            return []
        now_mono = model.sample.mono_s
        fs_by_path = {fs.path: fs for fs in free_space or ()}
        fired: list[Fired] = []
        with self._lock:
            todo = self._judge(model, verdict, fs_by_path, now_mono)
        for rule, subject, value, count, hold in todo:
            alert = self._fire(rule, subject, value, count, model, verdict, fs_by_path)
            hold.fired = alert
            fired.append(alert)
        return fired

    def _judge(self, model, verdict, fs_by_path, now_mono) -> list:
        """Advance every hold; (rule, subject, value, count, hold) for each that fires."""
        todo = []
        for rule in self.rules:
            seen = set()
            for subject, value in self._observe(rule, model, verdict, fs_by_path):
                key = (rule.name, subject)
                seen.add(key)
                if not rule.holds(value):
                    self._holds.pop(key, None)
                    continue
                hold = self._holds.setdefault(key, _Hold())
                hold.count += 1
                if hold.fired is not None or hold.count < rule.for_samples:
                    continue
                last = self._last_fired_mono.get(key)
                if last is not None and now_mono - last < rule.cooldown_s:
                    continue
                hold.fired = True        # the Fired object replaces this marker below
                self._last_fired_mono[key] = now_mono
                todo.append((rule, subject, value, hold.count, hold))
            for key in [k for k in self._holds if k[0] == rule.name and k not in seen]:
                del self._holds[key]     # a subject that is gone (a device removed, a job ended)
            if rule.per_job:
                # jobs come and go by the thousand (a sweep): a cooldown that has run out
                # decides nothing, and is forgotten
                for key in [k for k, at in self._last_fired_mono.items()
                            if k[0] == rule.name and k not in seen
                            and now_mono - at >= rule.cooldown_s]:
                    del self._last_fired_mono[key]
        return todo

    def active(self) -> list[Fired]:
        """Alerts that fired and whose condition still holds: what a banner keeps up."""
        with self._lock:
            return [h.fired for h in self._holds.values() if isinstance(h.fired, Fired)]

    def close(self, wait_s: float = 5.0) -> None:
        """Wait for commands still running (then kill them) and for the log and touch
        files (FILE_WAIT_S at most), and say every problem that was held back."""
        self.commands.close(wait_s)
        if not self._files.close(min(wait_s, FILE_WAIT_S)):
            self._say("files", f"alert log/touch files: a write took more than "
                      f"{min(wait_s, FILE_WAIT_S):g} s; {self._files.queued} not written")
        self._say_file_errors()
        self._say.flush()

    def _file(self, key: str, path: str, write, *args) -> None:
        """write(path, *args) on the files' thread; a full queue (its filesystem stalled)
        or a failed write is said once a minute under key."""
        def job():
            try:
                write(path, *args)
            except OSError as err:
                # said from the sampling thread (_say_file_errors): warnings are lines
                # on one stream, never written from two threads at once
                self._file_errors.append((key, f"alert {key.split(':')[0]}: {_why(err, path)}"))
        if not self._files.put(job):
            self._say(key, f"alert {key.split(':')[0]}: {path}: its filesystem has taken no "
                      f"write for {self._files.busy_s:.0f} s; lines are not written meanwhile")

    def _file_failed(self, _job, err: Exception) -> None:
        self._file_errors.append(("files", f"alert files: {type(err).__name__}: {err}"))

    def _say_file_errors(self) -> None:
        while self._file_errors:
            self._say(*self._file_errors.pop(0))

    # ------------------------------------------------------------------ conditions
    def _observe(self, rule: AlertRule, model, verdict, fs_by_path):
        if rule.kind == "metric":
            seen = catalog.observe(model, rule.metric, rule.devices, rule.mountpoints, rule.gpus)
            if rule.per_job:                  # a GPU metric: the named jobs' GPUs only
                gpus = job_gpus(rule, model)
                seen = [(subject, v) for subject, v in seen if int(subject) in gpus]
            return seen
        if rule.kind == "verdict" and rule.per_job:
            return [(v.job.id, v.state) for v in job_verdicts(rule, verdict)]
        if rule.kind == "verdict":
            return [("", verdict.state)] if verdict is not None else []
        fs = fs_by_path.get(rule.free_space)
        if fs is None:
            return []
        return [(rule.free_space, (fs.avail_gb, fs.avail_pct) if fs.ok else None)]

    # ------------------------------------------------------------------ firing
    def _fire(self, rule, subject, value, count, model, verdict, fs_by_path) -> Fired:
        details = self._details(rule, subject, value, count, model, verdict, fs_by_path)
        message = details["message"]
        env = {f"GDT_ALERT_{k.upper()}": v for k, v in details.items()}
        alert = Fired(rule=rule.name, kind=rule.kind, subject=subject,
                      value=value[0] if rule.kind == "free_space" else value,
                      message=message, wall_s=model.wall_s, samples=count,
                      bell=rule.bell, banner=rule.banner, env=env)
        self.fired_total[rule.name] = self.fired_total.get(rule.name, 0) + 1
        self._act(rule, alert, details)
        return alert

    def _details(self, rule, subject, value, count, model, verdict, fs_by_path) -> dict:
        """Every GDT_ALERT_* field (lower case, without the prefix), as strings."""
        d = {k: "" for k in ("name", "kind", "message", "value", "threshold", "op", "metric",
                             "subject", "device", "mountpoint", "gpu", "path", "state",
                             "reason", "samples", "time", "wall_s", "pid", "pids", "host",
                             "source", "job_id", "job_name")}
        d.update(name=rule.name, kind=rule.kind, subject=subject, samples=str(count),
                 time=iso_time(model.wall_s), wall_s=f"{model.wall_s:.3f}",
                 host=self.host_name, source=self.source)
        held = f"for {_plural(count, 'sample')}"
        pids: list[int]
        if rule.kind == "metric":
            d.update(metric=rule.metric, op=rule.op, threshold=_fmt(rule.value),
                     value=_fmt(value))
            family = catalog.family(rule.metric)
            if family == "disk":
                info = model.devices.get(subject)
                mounts = ",".join(info.mountpoints) if info else ""
                d.update(device=subject, mountpoint=mounts)
                where = f"{subject} ({mounts})" if mounts else subject
                pids = _pids(model, lambda gpu, p: _uses(model, p, subject))
            elif family == "gpu":
                d["gpu"] = subject
                job = job_of_gpu(model, int(subject))
                d.update(job_fields(job))
                where = f"GPU {subject}"
                if rule.per_job and job is not None:
                    where += f" ({job_words(job)})"
                pids = _pids(model, lambda gpu, p: gpu == int(subject))
            else:
                where = "host"
                pids = _pids(model)
            d["message"] = (f"{rule.name}: {where} {rule.metric} {_fmt(value)} {rule.op} "
                            f"{_fmt(rule.value)} {held}")
        elif rule.kind == "verdict" and rule.per_job:
            # the job's own verdict; its processes: the job's GPU processes, exactly
            v = next((v for v in job_verdicts(rule, verdict) if v.job.id == subject), None)
            info = v.job if v is not None else job_of_id(model, verdict, subject)
            reason = (getattr(v, "reason", "") or getattr(v, "raw_reason", "")) if v else ""
            d.update(state=value, value=value, reason=reason,
                     threshold="|".join(rule.states), **job_fields(info))
            mine = set(info.pids) if info is not None else set()
            pids = _pids(model, lambda gpu, p: p.pid in mine)
            who = job_words(info) if info is not None else f"job [{subject}]"
            d["message"] = (f"{rule.name}: {who}: {value} {held}"
                            + (f": {reason}" if reason else ""))
        elif rule.kind == "verdict":
            reason = getattr(verdict, "reason", "") or getattr(verdict, "raw_reason", "")
            d.update(state=value, value=value, reason=reason,
                     threshold="|".join(rule.states),
                     **job_fields(getattr(verdict, "job", None)))
            job = set(getattr(verdict, "processes", None) or ())
            pids = _pids(model, lambda gpu, p: p.pid in job)
            d["message"] = f"{rule.name}: {value} {held}" + (f": {reason}" if reason else "")
        else:
            fs = fs_by_path[subject]
            dev = next((i for i in model.devices.values()
                        if (i.major, i.minor) == (fs.dev_major, fs.dev_minor)), None)
            gb = fs.avail_gb
            limits = " or ".join(x for x in (
                f"{rule.below_gb:g} GB" if rule.below_gb is not None else "",
                f"{rule.below_pct:g}%" if rule.below_pct is not None else "") if x)
            d.update(path=subject, value=f"{gb:.2f}", metric="free_space_gb", op="<",
                     threshold=limits, device=dev.name if dev else "",
                     mountpoint=",".join(dev.mountpoints) if dev else "")
            size_gb = fs.size_bytes / GB if fs.size_bytes is not None else None
            of = f" of {size_gb:.1f} GB" if size_gb is not None else ""
            d["message"] = (f"{rule.name}: {subject} has {gb:.1f} GB free{of} "
                            f"(below {limits}) {held}")
            pids = _pids(model)
        if self.simulated:
            pids = []                 # simulated PIDs name nobody on this machine
        # one line, whatever the machine's text in it held: the banner, the log, a
        # command's {message} and GDT_ALERT_MESSAGE all show control characters escaped
        d["message"] = printable(d["message"])
        d["pids"] = " ".join(map(str, pids))
        d["pid"] = str(pids[0]) if pids else ""
        return d

    def _act(self, rule: AlertRule, alert: Fired, details: dict) -> None:
        line = log_line(alert.wall_s, alert.message)
        if self.simulated:
            line += " (simulated)"
        if rule.log == "stderr":
            if self.stderr is not None:
                try:
                    self.stderr.write(line + "\n")     # log_line escaped it
                    self.stderr.flush()
                except (OSError, ValueError):
                    pass
        if not self.real_actions:
            if rule.command or rule.touch is not None or rule.log not in (None, "stderr"):
                self._say("demo", "alerts on simulated data (--demo) run no command and "
                          "write no touch or log file; --demo-actions runs them")
            return
        if rule.log not in (None, "stderr"):
            self._file(f"{rule.name}:log", rule.log, append_line, line)
        if rule.touch is not None:
            self._file(f"{rule.name}:touch", rule.touch, write_details,
                       {k: v for k, v in details.items()})
        if rule.command:
            pids = [int(p) for p in details["pids"].split()]
            if needs_pids(rule.command) and not pids:
                self._say(f"{rule.name}:pids", f"alert {rule.name}: no GPU process "
                          f"{_whose(rule, alert.subject)} to give its command; not run")
                return
            argv = expand_argv(rule.command, details, pids)
            output = rule.log if rule.log not in (None, "stderr") else None
            self.commands.start(rule.name, argv, _command_env(alert.env), rule.timeout_s,
                                output=output, subject=alert.subject)


def _command_env(alert_env: dict[str, str]) -> dict[str, str]:
    import os

    env = dict(os.environ)
    env.update(alert_env)
    return env


def _pids(model, chosen=None) -> list[int]:
    """The PIDs (as this PID namespace sees them, so kill(1) works on them) of the GPU
    compute processes for which chosen(gpu_index, process) is true, every one when chosen
    is None.  Only processes mapped into this namespace: an unmapped host PID names nobody
    here, or somebody else."""
    out: list[int] = []
    for g in model.gpus:
        for p in g.processes:
            if p.mapped and p.local_pid is not None and p.local_pid not in out:
                if chosen is None or chosen(g.index, p):
                    out.append(p.local_pid)
    return out


def _uses(model, p, device: str) -> bool:
    """Whether the GPU process's tree has files on `device` (through partitions, dm, md)."""
    devs = (model.gpu_proc_io.get(p.pid) or {}).get("devices") or ()
    return any(device in device_stack(model.devices, d) for d in devs)


def _whose(rule: AlertRule, subject: str) -> str:
    if rule.kind == "verdict" and rule.per_job:
        return f"of job {subject}"
    if rule.kind == "verdict":
        return "of the verdict's job"
    if rule.kind == "metric" and catalog.family(rule.metric) == "disk":
        return f"with files on {subject}"
    if rule.kind == "metric" and catalog.family(rule.metric) == "gpu":
        return f"on GPU {subject}"
    return "on this node"


def _why(err: OSError, path: str) -> str:
    if isinstance(err, OutputError):
        return str(err)
    return f"cannot write {path}: {err.strerror or err}"
