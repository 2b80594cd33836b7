"""Category 9: config paths and contents.

Paths: the default config unreadable (uid 65534 with HOME=/root, as after `su`), a
FIFO, a directory, a dangling link, XDG_CONFIG_HOME odd or HOME unset; an explicit
--config that is unreadable, missing, a FIFO, a directory, huge (sparse and real), deeply
nested (arrays and inline tables), binary, NUL bytes, invalid UTF-8, a link to a zero
device, a link loop, empty, with a BOM or CRLF.  Contents: bad alert rules, thresholds,
watch paths and device labels.

Oracles: a bad explicit file or entry is one line naming it (exit 2); a default file that
cannot be read is a warning and the defaults (exit 0); nothing hangs (FIFO) or floods
memory; a valid file is used.  An entry the README's schema forbids that is accepted is
silent-wrong.
"""

from __future__ import annotations

import os
import random
import shutil
import stat

import fixtures
from harness import HANDLED, NOBODY, REFUSED, Case, Cases, Ctx, Result, gdt_argv, judge, parse_json

CAT = 9
BOUND_S = 10.0


def command(ctx: Ctx, which: str, as_nobody: bool = False) -> list[str]:
    rec = fixtures.demo_recording()
    if as_nobody:
        rec = ctx.path("rec.gdtrec")
        shutil.copy(fixtures.demo_recording(), rec)
        os.chmod(rec, 0o644)
    return {
        "once": ["--once", "--demo", "--json", "-i", "0.1"],
        "serve": ["serve", "--demo", "--count", "1", "--listen", "127.0.0.1:0", "-i", "0.1"],
        "report": ["report", rec, "--json"],
        "export": ["export", rec, "-f", "jsonl", "-o", "-"],
        "record": ["record", "-o", _out_dir(ctx, as_nobody) + "/r.gdtrec", "--demo", "--duration",
                   "0.3", "-i", "0.1"],
    }[which]


def _out_dir(ctx: Ctx, as_nobody: bool) -> str:
    d = ctx.path("out")
    os.makedirs(d, exist_ok=True)
    if as_nobody:
        os.chown(d, NOBODY, NOBODY)
    return d


def ok_output(which: str, run) -> list[str]:
    if which in ("once", "report"):
        return [] if parse_json(run.out) else ["stdout is not JSON"]
    if which == "export":
        return [] if run.out.count("\n") >= 5 else ["no rows exported"]
    if which == "serve":
        return [] if "serving http" in run.err else ["did not serve"]
    return []


# ------------------------------------------------------------------------ path kinds
def make_path(ctx: Ctx, path: str, kind: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    rng = random.Random(7)
    if kind == "unreadable":
        with open(path, "w") as f:
            f.write("[detector]\ngpu_low_util_pct = 50\n")
        os.chmod(path, 0o000)
    elif kind == "missing":
        pass
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        os.mkdir(path)
    elif kind == "huge-sparse":
        with open(path, "wb") as f:
            f.truncate(100 * 2**20)
    elif kind == "huge-comments":
        with open(path, "w") as f:
            f.write(("# " + "x" * 78 + "\n") * (20 * 2**20 // 81))
    elif kind.startswith("nested-array-"):
        n = int(kind.rsplit("-", 1)[1])
        with open(path, "w") as f:
            f.write("a = " + "[" * n + "]" * n + "\n")
    elif kind.startswith("nested-table-"):
        n = int(kind.rsplit("-", 1)[1])
        with open(path, "w") as f:
            f.write("a = " + "{b = " * n + "1" + "}" * n + "\n")
    elif kind == "dotted-10000":
        with open(path, "w") as f:
            f.write(".".join(["k"] * 10000) + " = 1\n")
    elif kind == "binary":
        with open(path, "wb") as f:
            f.write(bytes(rng.randrange(256) for _ in range(4096)))
    elif kind == "nul":
        with open(path, "wb") as f:
            f.write(b"[detector]\x00\ngpu_low_util_pct = 50\n")
    elif kind == "bad-utf8":
        with open(path, "wb") as f:
            f.write(b"# \xff\xfe\n[detector]\ngpu_low_util_pct = 50\n")
    elif kind == "zero-link":
        node = ctx.path("zero")
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 5))
        os.symlink(node, path)
    elif kind == "link-loop":
        os.symlink(path + ".b", path)
        os.symlink(path, path + ".b")
    elif kind == "dangling-link":
        os.symlink(ctx.path("nowhere.toml"), path)
    elif kind == "empty":
        open(path, "w").close()
    elif kind == "bom":
        with open(path, "wb") as f:
            f.write(b"\xef\xbb\xbf[detector]\ngpu_low_util_pct = 50\n")
    elif kind == "crlf":
        with open(path, "wb") as f:
            f.write(b"[detector]\r\ngpu_low_util_pct = 50\r\n")
    else:
        raise ValueError(kind)


# what each kind must give: "error" (explicit: one line), "ok" (used), "either"
EXPLICIT = {
    "unreadable": "error", "missing": "error", "fifo": "error", "directory": "error",
    "huge-sparse": "error", "huge-comments": "error", "nested-array-1000": "error",
    "nested-array-100000": "error", "nested-table-1000": "error", "nested-table-10000": "error",
    "dotted-10000": "either", "binary": "error", "nul": "error", "bad-utf8": "either",
    "zero-link": "error", "link-loop": "error", "dangling-link": "error", "empty": "ok",
    "bom": "either", "crlf": "ok",
}
DEFAULT = {
    "unreadable": "warn", "fifo": "warn-or-error", "directory": "warn-or-error",
    "dangling-link": "ok", "zero-link": "warn-or-error", "huge-sparse": "warn-or-error",
    "binary": "error",
}


def explicit_case(kind: str, which: str):
    def fn(ctx: Ctx) -> Result:
        cfg = ctx.path("cfg", "config.toml")
        make_path(ctx, cfg, kind)
        nobody = kind == "unreadable"
        argv = gdt_argv(*command(ctx, which, nobody), "--config", cfg,
                        as_uid=NOBODY if nobody else None)
        run = ctx.run(argv, timeout=40)

        def ok():
            p = ok_output(which, run)
            if EXPLICIT.get(kind) == "error":
                p.append(f"a {kind} --config was accepted")
            return p

        return judge(run, ok, bound_s=BOUND_S)
    return fn


def default_case(kind: str, which: str, home_root: bool = False):
    def fn(ctx: Ctx) -> Result:
        nobody = home_root
        if home_root:
            env = ctx.env(HOME="/root", XDG_CONFIG_HOME=None)
        else:
            make_path(ctx, os.path.join(ctx.xdg, "gpudisk-top", "config.toml"), kind)
            env = ctx.env()
        argv = gdt_argv(*command(ctx, which, nobody), as_uid=NOBODY if nobody else None)
        run = ctx.run(argv, env=env, timeout=40)

        def ok():
            p = ok_output(which, run)
            want = DEFAULT[kind]
            if want.startswith("warn") and "warning: cannot read the config file" not in run.err \
                    and "warning" not in run.err:
                p.append("a default config that cannot be read, used silently")
            if want == "error":
                p.append(f"a {kind} default config was accepted")
            return p

        return judge(run, ok, bound_s=BOUND_S)
    return fn


def env_case(label: str, env_change: dict):
    def fn(ctx: Ctx) -> Result:
        extra = {k: (v.format(dir=ctx.dir) if isinstance(v, str) else v) for k, v in env_change.items()}
        if label == "xdg-is-a-file":
            open(ctx.path("afile"), "w").close()
        run = ctx.run(gdt_argv(*command(ctx, "once")), env=ctx.env(**extra), timeout=30)
        return judge(run, lambda: ok_output("once", run), bound_s=BOUND_S)
    return fn


# ------------------------------------------------------------------------ contents
ALERT = '[[alerts]]\nname = "r"\nmetric = "disk_util_pct"\nop = ">"\nvalue = 90\n'
CONTENTS = {
    # alerts: (text, must be refused?)
    "alert-unknown-key": (ALERT + "colour = 1\n", True),
    "alert-value-nan": (ALERT.replace("value = 90", "value = nan"), True),
    "alert-value-inf": (ALERT.replace("value = 90", "value = inf"), True),
    "alert-value-string": (ALERT.replace("value = 90", 'value = "90"'), True),
    "alert-value-1e400": (ALERT.replace("value = 90", "value = 1e400"), True),
    "alert-for-samples-0": (ALERT + "for_samples = 0\n", True),
    "alert-for-samples-2e18": (ALERT + "for_samples = 2000000000000000000\n", False),
    "alert-cooldown-negative": (ALERT + "cooldown_s = -1\n", True),
    "alert-cooldown-nan": (ALERT + "cooldown_s = nan\n", True),
    "alert-timeout-0": (ALERT + "timeout_s = 0\n", True),
    "alert-timeout-inf": (ALERT + "timeout_s = inf\n", True),
    "alert-name-spaces": (ALERT.replace('name = "r"', 'name = "my rule"'), True),
    "alert-name-escape": (ALERT.replace('name = "r"', 'name = "r\\u001b[2J"'), True),
    "alert-no-name": (ALERT.replace('name = "r"\n', ""), True),
    "alert-command-string": (ALERT + 'command = "kill -9 {pid}"\n', True),
    "alert-command-empty": (ALERT + "command = []\n", True),
    "alert-command-unknown-placeholder": (ALERT + 'command = ["echo", "{pidz}"]\n', True),
    "alert-pids-in-arg": (ALERT + 'command = ["echo", "--pids={pids}"]\n', True),
    "alert-touch-relative": (ALERT + 'touch = "PAUSE"\n', True),
    "alert-log-relative": (ALERT + 'log = "alerts.log"\n', True),
    "alert-log-number": (ALERT + "log = 5\n", True),
    "alert-op-bad": (ALERT.replace('op = ">"', 'op = "=>"'), True),
    "alert-metric-unknown": (ALERT.replace("disk_util_pct", "disk_magic"), True),
    "alert-two-conditions": (ALERT + 'verdict = "starved"\n', True),
    "alert-verdict-unknown": ('[[alerts]]\nname = "v"\nverdict = "sleepy"\n', True),
    "alert-verdict-empty-list": ('[[alerts]]\nname = "v"\nverdict = []\n', True),
    "alert-free-space-relative": ('[[alerts]]\nname = "f"\nfree_space = "data"\nbelow_pct = 5\n', True),
    "alert-below-pct-200": ('[[alerts]]\nname = "f"\nfree_space = "/"\nbelow_pct = 200\n', True),
    "alert-below-gb-nan": ('[[alerts]]\nname = "f"\nfree_space = "/"\nbelow_gb = nan\n', True),
    "alert-gpu-negative": ('[[alerts]]\nname = "g"\nmetric = "gpu_util_pct"\nop = "<"\nvalue = 5\ngpu = -1\n', True),
    "alert-gpu-bool": ('[[alerts]]\nname = "g"\nmetric = "gpu_util_pct"\nop = "<"\nvalue = 5\ngpu = true\n', True),
    "alert-device-number": (ALERT + "device = 5\n", True),
    "alert-not-a-table": ("alerts = [1, 2]\n", True),
    "alert-duplicate-names": (ALERT + ALERT, True),
    "alerts-1000-rules": ("".join(ALERT.replace('name = "r"', f'name = "r{i}"') for i in range(1000)), False),
    # the detector
    "detector-gpu-low-negative": ("[detector]\ngpu_low_util_pct = -5\n", True),
    "detector-gpu-low-1000": ("[detector]\ngpu_low_util_pct = 1000\n", True),
    "detector-gpu-low-nan": ("[detector]\ngpu_low_util_pct = nan\n", True),
    "detector-enter-0": ("[detector]\nenter_intervals = 0\n", True),
    "detector-enter-huge": ("[detector]\nenter_intervals = 9223372036854775807\n", False),
    "detector-unknown-key": ("[detector]\nwarp = 9\n", True),
    "detector-not-a-table": ("detector = 5\n", True),
    "detector-baseline-negative": ("[detector.baseline_ms]\nNVMe = -1\n", True),
    "detector-baseline-string": ('[detector.baseline_ms]\nNVMe = "fast"\n', True),
    "detector-baseline-unknown-class": ("[detector.baseline_ms]\nFloppy = 1\n", True),
    "unknown-section": ("[flux]\ncapacitor = 1\n", True),
    "duplicate-key": ("[detector]\ngpu_low_util_pct = 50\ngpu_low_util_pct = 60\n", True),
    # watched paths and device labels
    "watch-relative": ('[watch]\npaths = ["data"]\n', True),
    "watch-nul": ('[watch]\npaths = ["/tmp/a\\u0000b"]\n', True),
    "watch-not-a-list": ('[watch]\npaths = "/data"\n', True),
    "watch-5000-paths": ("[watch]\npaths = [" + ", ".join(f'"/nonexistent/{i}"' for i in range(5000)) + "]\n", False),
    "labels-number": ('[devices."sd*"]\npurpose = 5\n', True),
    "labels-newline": ('[devices."sd*"]\npurpose = "a\\nb"\n', False),
    "labels-bad-key": ('[devices."sd*"]\n"bad-key" = "x"\n', True),
    "labels-reserved": ('[devices."sd*"]\ndevice = "x"\n', True),
    "valid-full": ("[detector]\ngpu_low_util_pct = 60\n[watch]\npaths = [\"/\"]\n" + ALERT, False),
}


def content_case(label: str, which: str):
    text, bad = CONTENTS[label]

    def fn(ctx: Ctx) -> Result:
        cfg = ctx.path("config.toml")
        with open(cfg, "w") as f:
            f.write(text)
        run = ctx.gdt(*command(ctx, which), "--config", cfg, timeout=40)

        def ok():
            p = ok_output(which, run)
            if bad:
                p.append("accepted an entry the schema forbids")
            return p

        res = judge(run, ok, bound_s=BOUND_S)
        if res.outcome == "clean-error" and "line" not in res.detail and label not in (
                "alert-value-1e400",):
            res.detail += " (does not name a line)"
        return res
    return fn


def cases() -> list[Case]:
    out = Cases(CAT)
    for kind, want in EXPLICIT.items():
        for which in ("once", "serve"):
            out.add(f"explicit/{kind}/{which}", f"--config <{kind}> with {which}",
                    explicit_case(kind, which), timeout_s=45, right=want)
    for which in ("report", "export", "record"):
        for kind in ("fifo", "nested-array-100000", "binary"):
            out.add(f"explicit/{kind}/{which}", f"--config <{kind}> with {which}",
                    explicit_case(kind, which), timeout_s=45, expect=REFUSED)
    for which in ("once", "serve", "report", "export", "record"):
        out.add(f"default/unreadable-home-root/{which}",
                f"uid 65534 with HOME=/root: the default config cannot be read ({which})",
                default_case("unreadable", which, home_root=True), timeout_s=45,
                expect=HANDLED)
    for kind, want in DEFAULT.items():
        if kind == "unreadable":
            continue
        for which in ("once", "serve"):
            out.add(f"default/{kind}/{which}", f"the default config is a {kind} ({which})",
                    default_case(kind, which), timeout_s=45, right=want)
    for label, env in (("xdg-relative", {"XDG_CONFIG_HOME": "relative/dir"}),
                       ("xdg-empty", {"XDG_CONFIG_HOME": ""}),
                       ("xdg-is-a-file", {"XDG_CONFIG_HOME": "{dir}/afile"}),
                       ("home-unset", {"HOME": None, "XDG_CONFIG_HOME": None}),
                       ("home-nonexistent", {"HOME": "/nonexistent/home", "XDG_CONFIG_HOME": None})):
        out.add(f"env/{label}", f"--once with {label}", env_case(label, env),
                timeout_s=30, expect=HANDLED)
    for label, (text, bad) in CONTENTS.items():
        which = "once" if label.startswith(("detector", "duplicate", "unknown")) else "serve"
        out.add(f"content/{label}", f"a config with {label} ({which})",
                content_case(label, which), timeout_s=45,
                expect=REFUSED if bad else HANDLED)
    return out
