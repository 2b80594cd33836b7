"""Alert rules: the [[alerts]] entries of the config file.

A rule is one condition, held for `for_samples` consecutive samples, then actions; it
fires again for the same subject only after `cooldown_s`.  No expression is evaluated:
a condition is one of three fixed forms.

    [[alerts]]                      # a metric against a threshold, per device or GPU
    name = "disk-busy"
    metric = "disk_util_pct"        # see gpudisk_top.alerts.catalog.METRICS
    device = "nvme*"                # optional: globs (or a list); also mountpoint = "/data*"
    op = ">"                        # > >= < <= == !=
    value = 90
    for_samples = 3
    cooldown_s = 300

    [[alerts]]                      # the starvation detector's verdict
    name = "starving"
    verdict = "starved"             # any starved state, or one of them, or a list

    [[alerts]]                      # each job's verdict, on a shared node
    name = "slurm-job-starving"
    verdict = "starved"
    job = "slurm:*"                 # globs on the job's id (or a list); job_name = "pod team-a/*"
    command = ["scontrol", "notify", "{job_id}", "{message}"]

    [[alerts]]                      # free space of a path (watched automatically)
    name = "checkpoint-space"
    free_space = "/checkpoints"
    below_gb = 10                   # or below_pct = 5
    touch = "/checkpoints/PAUSE"    # actions: log, bell, banner, command, touch

Actions: `log = "stderr"` (the default) or a file path, or false; `bell = true` and
`banner = true` (the dashboard's); `command = ["argv", ...]`, run without a shell, with
the alert's details in GDT_ALERT_* environment variables and {name}-style placeholders in
its arguments (a shell's -c script with a placeholder in it is refused unless the rule
says `allow_shell = true`: the values are the machine's text); `touch = PATH`, a file
(re)written with the alert's details as JSON.
"""

from __future__ import annotations

import fnmatch
import math
import os
import re
from dataclasses import dataclass

from gpudisk_top.alerts import catalog
from gpudisk_top.verdict.detect import STARVED_STATES, STATES
from gpudisk_top.outfile import is_absolute_path

OPS = {
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}
ANY_STARVED = "starved"
# placeholders a command's arguments may hold; "{pids}" as a whole argument becomes one
# argument per PID
PLACEHOLDERS = ("name", "value", "threshold", "op", "metric", "subject", "device",
                "mountpoint", "gpu", "path", "state", "pid", "pids", "message", "job_id",
                "job_name")
_PLACEHOLDER_RE = re.compile(r"\{([a-z_]+)\}")
_NAME_RE = re.compile(r"^[A-Za-z0-9_.:-]+$")

KEYS = ("name", "metric", "op", "value", "device", "mountpoint", "gpu", "job", "job_name",
        "verdict", "free_space", "below_gb", "below_pct", "for_samples", "cooldown_s", "log", "bell",
        "banner", "command", "touch", "timeout_s", "allow_shell")
CONDITIONS = ("metric", "verdict", "free_space")
DEFAULT_COOLDOWN_S = 300.0
DEFAULT_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class AlertRule:
    name: str
    kind: str                               # "metric" | "verdict" | "free_space"
    metric: str | None = None
    op: str | None = None
    value: float | None = None
    devices: tuple[str, ...] = ()           # globs on device names
    mountpoints: tuple[str, ...] = ()       # globs on mountpoints
    gpus: tuple[int, ...] | None = None     # None: every GPU
    jobs: tuple[str, ...] = ()              # globs on job ids: judged per job (alerts/jobs.py)
    job_names: tuple[str, ...] = ()         # globs on job names
    states: tuple[str, ...] = ()            # verdict states that satisfy the rule
    free_space: str | None = None
    below_gb: float | None = None
    below_pct: float | None = None
    for_samples: int = 1
    cooldown_s: float = DEFAULT_COOLDOWN_S
    log: str | None = "stderr"              # "stderr", a file path, or None
    bell: bool = False
    banner: bool = True
    command: tuple[str, ...] = ()
    touch: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    allow_shell: bool = False               # a shell given placeholders in its script, asked for
    line: int | None = None                 # the [[alerts]] line in the config file

    def holds(self, value) -> bool:
        """The condition on one observed value (None, n/a, never holds)."""
        if value is None:
            return False
        if self.kind == "metric":
            return OPS[self.op](value, self.value)
        if self.kind == "verdict":
            return value in self.states
        gb, pct = value
        return ((self.below_gb is not None and gb is not None and gb < self.below_gb)
                or (self.below_pct is not None and pct is not None and pct < self.below_pct))

    @property
    def per_job(self) -> bool:
        """Whether the rule is judged per job (it names jobs), not on the node."""
        return bool(self.jobs or self.job_names)

    def matches_job(self, job_id: str, name: str) -> bool:
        """Whether a job (its id and name) is one the rule names: every given matcher
        holds (job: a glob on the id; job_name: a glob on the name)."""
        return ((not self.jobs or any(fnmatch.fnmatchcase(job_id, g) for g in self.jobs))
                and (not self.job_names
                     or any(fnmatch.fnmatchcase(name, g) for g in self.job_names)))

    def condition(self) -> str:
        """'disk_util_pct > 90', 'verdict disk-starved', 'free space of /x < 10 GB'; a
        rule per job says of which ('verdict starved of job slurm:*')."""
        jobs = " or ".join([*self.jobs, *(f"named {g}" for g in self.job_names)])
        of = f" of job {jobs}" if jobs else ""
        if self.kind == "metric":
            return f"{self.metric} {self.op} {self.value:g}{of}"
        if self.kind == "verdict":
            shown = ANY_STARVED if set(self.states) == STARVED_STATES else "|".join(self.states)
            return f"verdict {shown}{of}"
        limits = [f"{self.below_gb:g} GB" if self.below_gb is not None else None,
                  f"{self.below_pct:g}%" if self.below_pct is not None else None]
        return f"free space of {self.free_space} < " + " or ".join(x for x in limits if x)


# ---------------------------------------------------------------------------- parsing
def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _globs(v) -> tuple[str, ...] | None:
    if isinstance(v, str) and v:
        return (v,)
    if isinstance(v, list) and v and all(isinstance(x, str) and x for x in v):
        return tuple(v)
    return None


def parse_alerts(value, ctx) -> tuple[AlertRule, ...]:
    """SECTION_PARSERS["alerts"]: the [[alerts]] array of tables -> rules, in file order.
    Raises ConfigError (through ctx) naming the line of the offending key."""
    if value == {}:
        return ()      # no [[alerts]] at all
    if not isinstance(value, list):
        ctx.fail("alerts", None, "alerts must be an array of tables: write each rule under "
                                 "its own [[alerts]] line")
    rules: list[AlertRule] = []
    names: set[str] = set()
    for i, entry in enumerate(value):
        rule = _parse_rule(entry, i, ctx)
        if rule.name in names:
            ctx.fail_entry("alerts", i, "name", f"alerts: a second rule is named {rule.name!r}")
        names.add(rule.name)
        rules.append(rule)
    return tuple(rules)


def _parse_rule(entry, i: int, ctx) -> AlertRule:
    def fail(key, message):
        ctx.fail_entry("alerts", i, key, message)

    if not isinstance(entry, dict):
        fail(None, "each [[alerts]] entry must be a table")
    for key in entry:
        if key not in KEYS:
            fail(key, f"alerts: unknown setting {key!r} (known: {', '.join(KEYS)})")
    name = entry.get("name")
    if not isinstance(name, str) or not _NAME_RE.match(name):
        fail("name" if "name" in entry else None,
             "alerts: every rule needs a name of letters, digits, '_', '-', '.' or ':', "
             'e.g. name = "disk-busy"')
    label = f"alerts {name!r}"
    given = [k for k in CONDITIONS if k in entry]
    if len(given) != 1:
        fail(given[1] if len(given) > 1 else None,
             f"{label}: give exactly one condition: metric = ..., verdict = ... or "
             f"free_space = ...")
    kind = given[0]
    fields: dict = {"name": name, "kind": kind, "line": ctx.entry_line("alerts", i, None)}

    allowed = {"metric": {"metric", "op", "value", "device", "mountpoint", "gpu", "job",
                          "job_name"},
               "verdict": {"verdict", "job", "job_name"},
               "free_space": {"free_space", "below_gb", "below_pct"}}[kind]
    for key in ("metric", "op", "value", "device", "mountpoint", "gpu", "job", "job_name",
                "verdict", "free_space", "below_gb", "below_pct"):
        if key in entry and key not in allowed:
            fail(key, f"{label}: {key!r} does not go with a {kind} condition")
    for key, attr in (("job", "jobs"), ("job_name", "job_names")):
        if key in entry:
            globs = _globs(entry[key])
            if globs is None:
                fail(key, f"{label}: {key} must be a glob or a list of globs, e.g. "
                          + ('job = "slurm:*"' if key == "job" else 'job_name = "pod team-a/*"'))
            if kind == "metric" and entry.get("metric") in catalog.METRICS \
                    and catalog.family(entry["metric"]) != "gpu":
                fail(key, f"{label}: {key} selects jobs: a verdict rule or a GPU metric's "
                          f"(a job's GPUs); {entry['metric']} is not a GPU metric")
            fields[attr] = globs

    if kind == "metric":
        metric = entry["metric"]
        if metric not in catalog.METRICS:
            fail("metric", f"{label}: unknown metric {metric!r}; metrics are disk_<iostat "
                           "attribute> (disk_util_pct, disk_r_await_ms, ...), gpu_<attribute> "
                           "(gpu_util_pct, ...) or host_<attribute> (host_psi_io_some_pct, ...)")
        op = entry.get("op")
        if op not in OPS:
            fail("op" if "op" in entry else "metric",
                 f"{label}: op must be one of {' '.join(OPS)}")
        if not _number(entry.get("value")):
            fail("value" if "value" in entry else "metric",
                 f"{label}: value must be a number (the threshold, in the metric's own unit)")
        fields.update(metric=metric, op=op, value=float(entry["value"]))
        family = catalog.family(metric)
        for key in ("device", "mountpoint"):
            if key in entry:
                if family != "disk":
                    fail(key, f"{label}: {key} selects disks; {metric} is not a disk metric")
                globs = _globs(entry[key])
                if globs is None:
                    fail(key, f"{label}: {key} must be a glob or a list of globs")
                fields["devices" if key == "device" else "mountpoints"] = globs
        if "gpu" in entry:
            if family != "gpu":
                fail("gpu", f"{label}: gpu selects GPUs; {metric} is not a GPU metric")
            g = entry["gpu"]
            gpus = [g] if isinstance(g, int) and not isinstance(g, bool) else g
            if not (isinstance(gpus, list) and gpus and all(
                    isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in gpus)):
                fail("gpu", f"{label}: gpu must be a GPU index or a list of them, e.g. [0, 1]")
            fields["gpus"] = tuple(gpus)
    elif kind == "verdict":
        v = entry["verdict"]
        wanted = [v] if isinstance(v, str) else v
        if not (isinstance(wanted, list) and wanted and all(isinstance(x, str) for x in wanted)):
            fail("verdict", f"{label}: verdict must be a state or a list of states")
        states: list[str] = []
        for s in wanted:
            if s == ANY_STARVED:
                states += [x for x in STATES if x in STARVED_STATES]
            elif s in STATES:
                states.append(s)
            else:
                fail("verdict", f"{label}: unknown state {s!r} (known: {ANY_STARVED}, "
                                f"{', '.join(STATES)})")
        fields["states"] = tuple(dict.fromkeys(states))
    else:
        path = entry["free_space"]
        if not is_absolute_path(path):
            fail("free_space", f"{label}: free_space must be an absolute path")
        fields["free_space"] = os.path.normpath(path)
        limits = [k for k in ("below_gb", "below_pct") if k in entry]
        if not limits:
            fail("free_space", f"{label}: say when: below_gb = 10 (GB, 10^9 bytes) or "
                               "below_pct = 5")
        for key in limits:
            if not _number(entry[key]) or entry[key] <= 0:
                fail(key, f"{label}: {key} must be a number above 0")
            if key == "below_pct" and entry[key] > 100:
                fail(key, f"{label}: below_pct must be at most 100")
            fields[key] = float(entry[key])

    n = entry.get("for_samples", 1)
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        fail("for_samples", f"{label}: for_samples must be a whole number >= 1")
    fields["for_samples"] = n
    for key in ("cooldown_s", "timeout_s"):
        if key in entry:
            v = entry[key]
            if not _number(v) or v < 0 or (key == "timeout_s" and v == 0):
                fail(key, f"{label}: {key} must be a number of seconds"
                          + (" above 0" if key == "timeout_s" else " >= 0"))
            fields[key] = float(v)

    _parse_actions(entry, fields, fail, label)
    return AlertRule(**fields)


# a shell is any program whose name ends in "sh" (sh, bash, dash, zsh, ksh, csh, fish,
# rbash, ...; ssh's -c is a cipher) or busybox running one
def _is_shell(path: str) -> bool:
    name = os.path.basename(path)
    return name.endswith("sh") and name != "ssh"


_SHELL_C_RE = re.compile(r"^-[A-Za-z]*c[A-Za-z]*$")   # -c, -ec, -lc, ...


def shell_script_placeholders(argv) -> tuple[str, list[str]] | None:
    """(the shell, the placeholders in what it parses as code) when argv runs a shell
    with -c and a placeholder is in its options or its script (not in the arguments
    after the script, which the script sees as $0, $1, ...: data, never code).  None
    otherwise.  `env` and VAR=value before the shell are seen through."""
    words = list(argv)
    if words and os.path.basename(words[0]) == "env":
        words.pop(0)
        while words and ("=" in words[0] or words[0].startswith("-")):
            words.pop(0)
    if not words:
        return None
    rest = words[1:]
    if os.path.basename(words[0]) == "busybox" and rest and _is_shell(rest[0]):
        rest = rest[1:]
    elif not _is_shell(words[0]):
        return None
    # the first -c anywhere (options such as `-o pipefail` take arguments; a -c after a
    # script file would be the script's own argument: refused too, the safe side)
    at = next((i for i, arg in enumerate(rest) if _SHELL_C_RE.match(arg)), None)
    if at is None:
        return None
    code = rest[:at + 2]                 # the options and the script after -c
    found = [w for a in code for w in _PLACEHOLDER_RE.findall(a)]
    return (words[0], found) if found else None


def _parse_actions(entry, fields, fail, label) -> None:
    if "log" in entry:
        log = entry["log"]
        if log is False:
            fields["log"] = None
        elif log is True or log == "stderr":
            fields["log"] = "stderr"
        elif is_absolute_path(log):
            fields["log"] = log
        else:
            fail("log", f'{label}: log must be "stderr", an absolute file path, or false')
    for key in ("bell", "banner"):
        if key in entry:
            if not isinstance(entry[key], bool):
                fail(key, f"{label}: {key} must be true or false")
            fields[key] = entry[key]
    if "command" in entry:
        argv = entry["command"]
        if isinstance(argv, str):
            fail("command", f"{label}: command must be a list of arguments, run without a "
                            f'shell, e.g. ["kill", "-USR1", "{{pid}}"]')
        if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)
                and argv[0]):
            fail("command", f"{label}: command must be a non-empty list of strings")
        for arg in argv:
            for word in _PLACEHOLDER_RE.findall(arg):
                if word not in PLACEHOLDERS:
                    fail("command", f"{label}: unknown placeholder {{{word}}} in command "
                                    f"(known: {', '.join('{' + p + '}' for p in PLACEHOLDERS)})")
            if "{pids}" in arg and arg != "{pids}":
                fail("command", f"{label}: {{pids}} must be an argument of its own")
        allow = entry.get("allow_shell", False)
        if not isinstance(allow, bool):
            fail("allow_shell", f"{label}: allow_shell must be true or false")
        shell = shell_script_placeholders(argv)
        if shell is not None and not allow:
            words = " ".join(dict.fromkeys("{" + w + "}" for w in shell[1]))
            fail("command", f"{label}: command runs {shell[0]} -c with {words} in its "
                            "script: text from the machine (a mount path, a verdict's "
                            "reason) would run as shell code. Pass values as arguments, "
                            'e.g. ["/usr/local/bin/notify", "{message}"], or to the script '
                            'as $1: ["sh", "-c", "notify \\"$1\\"", "sh", "{message}"], '
                            "or read $GDT_ALERT_MESSAGE; allow_shell = true runs it as "
                            "written")
        fields["command"] = tuple(argv)
        fields["allow_shell"] = allow
    if "touch" in entry:
        path = entry["touch"]
        if not is_absolute_path(path):
            fail("touch", f"{label}: touch must be an absolute file path")
        fields["touch"] = path
