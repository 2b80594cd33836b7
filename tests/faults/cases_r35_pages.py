"""Category 12, part `pages` (issue 35 item 1): /proc files longer than a page.

The kernel answers a read of a seq_file one page at a time, so a reader that takes a
short read for the end sees only the first page.  Each case makes the long file for real
and runs the real command line:

- `diskstats-100-loops/once-json-all`: 100 loop devices; `--once --json -a` must list
  every one of them, and every device `iostat -x -d -k` lists (the README: "every block
  device: partitions, loop, idle" under -a, and `iostat -x`-exact disk numbers);
- `fuse-behind-N-mounts/once-json`: in a private mount namespace, N tmpfs, then a FUSE
  mount (tests/slowfs.py) holding a file a stand-in GPU's process has open: `--once
  --json` must name the mount (README: a FUSE mount is named with its numbers); N = 0 is
  the control that shows the setup itself works;
- `probe-tmpfs-behind-800-mounts`: `probe` of a 260 MiB file on a tmpfs mounted behind 800
  others must be refused (probe measures block devices: "a file on a filesystem with no
  block device") and must keep no ceiling (RAM speed kept as a disk's would mislead
  every later verdict);
- `procfs-short-reads/once-json`: a `--procfs` copy served by a FUSE daemon that answers
  every read in 100-byte pieces: `--once --json` must say what it says on the same
  copy in a plain directory.

The namespaces, mounts and loop devices are made by tests/manypages.py and taken down
whatever happens (a namespace's mounts go with its last process).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from harness import (PY, TESTS, Case, Cases, Ctx, Result, gdt_argv, judge, parse_json,
                     unjudged)

CAT = 12
PIECE_BYTES = 100        # the short-read daemon's answer to every read()
PROBE_FILE_MIB = 260     # above probe's 256 MiB floor for a file: it would be read


def _once_json(run) -> tuple[dict | None, list[str]]:
    data = parse_json(run.out)
    if not isinstance(data, dict):
        return None, ["stdout is not a JSON object"]
    return data, []


# ------------------------------------------------------------------ 100 loop devices
def loops_once(ctx: Ctx) -> Result:
    import manypages

    why = manypages.loops_unavailable()
    if why:
        return unjudged(why)
    os.makedirs(ctx.path("loops"))
    try:
        with manypages.loop_devices(100, ctx.path("loops")) as made:
            listed_by_iostat = manypages.iostat_devices()
            run = ctx.gdt("--once", "--json", "-a", "-i", "0.5", timeout=60)
    except RuntimeError as err:
        return unjudged(str(err))

    def ok():
        data, problems = _once_json(run)
        if data is None:
            return problems
        names = {d.get("name") for d in data.get("disks", [])}
        missing = [n for n in made if n not in names]
        if missing:
            problems.append(f"{len(missing)} of the 100 loop devices not listed "
                            f"({len(names)} disks listed), e.g. {missing[:3]}")
        if listed_by_iostat is not None:
            absent = [n for n in listed_by_iostat if n not in names]
            if absent:
                problems.append(f"iostat -x lists {len(listed_by_iostat)} devices, "
                                f"{len(absent)} of them not here, e.g. {absent[:3]}")
        return problems
    return judge(run, ok)


# ------------------------------------------------------------------ FUSE behind mounts
# run in the namespace after the tmpfs: a slowfs mount over SRC, a reader holding a file
# on it open, and --once --json with a stand-in GPU whose process is that reader
_FUSE_STAGE = r'''
import json, os, subprocess, sys
cfg = json.loads(sys.argv[1])
sys.path[:0] = [cfg["tests"]]
import slowfs, standin
try:
    mounting = slowfs.mounted(cfg["src"], latency_ms=0.0, mb_s=1000.0)
    mnt, daemon = mounting.__enter__()
except BaseException as err:
    print(f"manypages: no FUSE here: {err}", file=sys.stderr)
    sys.exit(77)
reader = None
rc = 1
try:
    reader = subprocess.Popen([sys.executable, "-c", "import sys, time\n"
                               "f = open(sys.argv[1], 'rb'); f.read(4096)\n"
                               "print('open', flush=True); time.sleep(120)",
                               os.path.join(mnt, "data.bin")], stdout=subprocess.PIPE)
    reader.stdout.readline()
    with open(cfg["setup"], "w") as f:
        json.dump({"mnt": mnt, "reader": reader.pid, "daemon": daemon.pid}, f)
    cmd, env = standin.command(["--once", "--json", "-i", "0.5"], gpus=1,
                               processes={0: [reader.pid]})
    rc = subprocess.run(cmd, env=env, timeout=60).returncode
finally:
    if reader is not None:
        reader.kill()
        reader.wait()
    mounting.__exit__(None, None, None)
sys.exit(rc)
'''


def fuse_behind(n_mounts: int):
    def fn(ctx: Ctx) -> Result:
        import manypages

        why = manypages.ns_unavailable()
        if why:
            return unjudged(why)
        src = ctx.path("src")
        os.makedirs(src)
        with open(os.path.join(src, "data.bin"), "wb") as f:
            f.write(os.urandom(2**20))
        setup = ctx.path("setup.json")
        stage = [PY, "-c", _FUSE_STAGE, json.dumps({"tests": TESTS, "src": src,
                                                     "setup": setup})]
        base = ctx.path("ns")
        os.makedirs(base)
        run = ctx.run(manypages.ns_argv(base, n_mounts, stage), timeout=90)
        if run.rc == manypages.SKIP_EXIT:
            return unjudged(run.err.strip()[-300:])

        def ok():
            data, problems = _once_json(run)
            if data is None:
                return problems
            try:
                with open(setup) as f:
                    mnt = json.load(f)["mnt"]
            except (OSError, ValueError, KeyError):
                return ["the setup wrote no setup.json"]
            mounts = [m for m in data.get("mounts", []) if m.get("mountpoint") == mnt]
            if not mounts:
                named = [m.get("mountpoint") for m in data.get("mounts", [])]
                problems.append(f"the FUSE mount {mnt} the GPU's process reads is not "
                                f"named (mounts: {named})")
            elif mounts[0].get("kind") != "fuse" or mounts[0].get("fstype") != "fuse.slowfs":
                problems.append(f"the mount is named as {mounts[0].get('kind')} "
                                f"{mounts[0].get('fstype')}, not fuse fuse.slowfs")
            return problems
        return judge(run, ok)
    return fn


# ------------------------------------------------------------------ probe of a tmpfs
def probe_tmpfs_behind(ctx: Ctx) -> Result:
    import manypages

    why = manypages.ns_unavailable()
    if why:
        return unjudged(why)
    state = ctx.path("state")
    results = os.path.join(state, "gpudisk-top", "probes.json")
    base = ctx.path("ns")
    os.makedirs(base)
    argv = manypages.ns_argv(base, 800, gdt_argv("probe", "--engine", "builtin", "--seconds",
                                                 "1.5", "{last}/data.bin"),
                             last_size="300m", file_mib=PROBE_FILE_MIB)
    run = ctx.run(argv, env=ctx.env(XDG_STATE_HOME=state), timeout=90)
    if run.rc == manypages.SKIP_EXIT:
        return unjudged(run.err.strip()[-300:])

    def harm():
        if not os.path.exists(results):
            return []
        try:
            with open(results) as f:
                devices = json.load(f).get("devices", {})
        except (OSError, ValueError, AttributeError):
            return ["probe left an unreadable probes.json"]
        kept = []
        for key, value in devices.items():
            value = value if isinstance(value, dict) else {}
            ceiling = value.get("ceiling") if isinstance(value.get("ceiling"), dict) else {}
            iops, dev = ceiling.get("randread_qd32_iops"), value.get("device")
            kept.append(f"{key} (device {dev}, {iops} random reads/s)")
        return [f"a tmpfs's speed kept as a device's ceiling: {', '.join(kept)}"] if kept else []
    return judge(run, lambda: ["probe measured a file on tmpfs and exited 0"], harm=harm)


# ------------------------------------------------------------------ short reads
def procfs_short_reads(ctx: Ctx) -> Result:
    import slowfs
    from cases_procfs import make_procfs

    root = make_procfs(ctx)
    plain = ctx.gdt("--once", "--json", "--procfs", root, "-a", "-i", "0.3", timeout=30)
    want, _ = _once_json(plain)
    if plain.rc != 0 or want is None:
        return unjudged(f"the plain copy gave no answer: exit {plain.rc}: {plain.err[-200:]}")
    try:
        mounting = slowfs.mounted(root, latency_ms=0.0, mb_s=1000.0, direct_io=True,
                                  short_reads=PIECE_BYTES)
        mnt, _daemon = mounting.__enter__()
    except BaseException as err:  # noqa: BLE001 - pytest.skip too
        return unjudged(f"no FUSE here: {err}")
    try:
        run = ctx.gdt("--once", "--json", "--procfs", mnt, "-a", "-i", "0.3", timeout=30)
    finally:
        mounting.__exit__(None, None, None)

    def ok():
        got, problems = _once_json(run)
        if got is None:
            return problems
        for key in ("disks", "host", "warnings"):
            if got.get(key) != want.get(key):
                mine = got.get(key)
                size = len(mine) if isinstance(mine, (list, dict)) else mine
                problems.append(f"{key} differs from the same files read from a plain "
                                f"directory ({size} against {len(want.get(key) or [])})")
        return problems
    return judge(run, ok)


def cases() -> list[Case]:
    out = Cases(CAT)
    out.add("pages/diskstats-100-loops/once-json-all", "--once --json -a with 100 loop "
            "devices (diskstats ~5 KB, over a page): every one listed, as iostat -x does",
            loops_once, right="ok", timeout_s=180, solo=True)
    for n in (0, 300):
        out.add(f"pages/fuse-behind-{n}-mounts/once-json", f"--once --json, a stand-in GPU's "
                f"process holding a file open on a FUSE mount made after {n} tmpfs mounts "
                "(a private mount namespace): the mount is named", fuse_behind(n),
                right="ok", timeout_s=120)
    out.add("pages/probe-tmpfs-behind-800-mounts", f"probe of a {PROBE_FILE_MIB} MiB file on "
            "a tmpfs mounted after 800 others: refused, no ceiling kept", probe_tmpfs_behind,
            right="refuse", timeout_s=120)
    out.add("pages/procfs-short-reads/once-json", f"--once --json -a --procfs on a copy "
            f"served by FUSE in {PIECE_BYTES}-byte reads: the same answer as from a plain "
            "directory", procfs_short_reads, right="ok", timeout_s=60)
    return out
