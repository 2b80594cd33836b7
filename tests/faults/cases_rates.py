"""Category 7: impossible rates, through `gpudisk-top --once --json --procfs DIR`.

--once reads DIR/diskstats, sleeps --interval, and reads it again; a wrapper (as in
tests/test_fault_rates_cli.py) rewrites the file with the second text once the sleep is
over, so the two reads see exactly the two generated texts.  Pairs: 32- and 64-bit wraps,
every counter going down, devices appearing (fresh, or with since-boot counters) and
re-created, a changed number of fields, rates over any device's ceiling, busy time over
the interval, torn rewrites (tests/diskstats_gen.py), duplicate names, and the
generator's seeded sequences with the intervals no device could make.

Oracle (restated here, not imported): every rate printed is finite, non-negative, %util
at most 110 % of the interval plus 20 ms, ops at most 1e8/s, bytes at most 1e12/s; a
device whose interval is known impossible is dropped (null rates, a reason, a warning);
one known possible keeps iostat's numbers (gpudisk_top.diskstats.rates, the iostat-
checked reference) exactly.
"""

from __future__ import annotations

import functools
import math
import random
import shutil

import diskstats_gen
import diskstats_lines
from diskstats_lines import BASE, SWAP_AFTER_SLEEP, TICKS, U64, line
from harness import HANDLED, PY, Case, Cases, Ctx, Result, judge, parse_json

CAT = 7
INTERVAL = "0.5"

# half a second of the busy SSD (diskstats_lines.BASE): 100 ms busy
STEP = dict(rd_ios=1000, rd_merges=50, rd_sectors=8000, rd_ticks=450, wr_ios=250,
            wr_merges=10, wr_sectors=4000, wr_ticks=350, tot_ticks=100, rq_ticks=800,
            dc_ios=2, dc_merges=1, dc_sectors=1024, dc_ticks=1, fl_ios=5, fl_ticks=8)
advanced = functools.partial(diskstats_lines.advanced, STEP)


def within_bounds(d: dict, interval_s: float) -> list[str]:
    p = []
    for k, v in d.items():
        if k in ("name", "display_name", "kind", "class", "mountpoints", "rotational", "parent",
                 "slaves", "dropped") or v is None or isinstance(v, (str, list, bool, dict)):
            # dict: the disk's health verdict (device, status, reasons), no rates
            continue
        if not math.isfinite(v) or v < 0:
            p.append(f"{d['name']} {k} = {v}")
    ms = max(interval_s, 0.01) * 1000
    if (d.get("util_pct") or 0) > (ms * 1.1 + 20) / ms * 100 + 1e-9:
        p.append(f"{d['name']} util_pct {d['util_pct']} over the interval")
    for k in ("r_s", "w_s", "d_s", "f_s", "rrqm_s", "wrqm_s", "drqm_s"):
        if (d.get(k) or 0) > 1e8:
            p.append(f"{d['name']} {k} {d[k]:.3g}/s")
    for k in ("rkb_s", "wkb_s"):
        if (d.get(k) or 0) * 1024 > 1e12 * (1 + 1e-12):
            p.append(f"{d['name']} {k} {d[k]:.3g}")
    return p


def once(ctx: Ctx, first: str, second: str, text: bool = False):
    procfs = ctx.path("proc")
    import os
    os.mkdir(procfs)
    with open(os.path.join(procfs, "diskstats"), "w") as f:
        f.write(first)
    for name in ("stat", "meminfo"):
        shutil.copy(f"/proc/{name}", os.path.join(procfs, name))
    with open(ctx.path("second"), "w") as f:
        f.write(second)
    argv = [PY, "-c", SWAP_AFTER_SLEEP, os.path.join(procfs, "diskstats"), ctx.path("second"),
            "--once", "--interval", INTERVAL, "--procfs", procfs, "--sysfs", ctx.path("nosys"), "-a"]
    if not text:
        argv.append("--json")
    return ctx.run(argv, timeout=30)


def _reference(first: str, second: str, interval_s: float) -> dict:
    from gpudisk_top.collect.diskstats import parse_checked
    from gpudisk_top.diskstats import parse, rates

    return {n: r.as_dict() for n, r in
            rates(parse(first), parse_checked(second, whole_lines=True)[0], interval_s).items()}


def rates_case(first: str, second: str, keep=(), drop=(), dup_warning: str | None = None,
               text: bool = False):
    """keep: devices that must keep iostat's numbers; drop: devices that must be dropped;
    every other device: within bounds or dropped."""
    def fn(ctx: Ctx) -> Result:
        run = once(ctx, first, second, text=text)

        def ok():
            if text:
                return _text_ok(run.out, drop)
            doc = parse_json(run.out)
            if doc is None:
                return ["stdout is not JSON"]
            p = []
            interval = doc["interval_s"]
            by_name = {d["name"]: d for d in doc["disks"]}
            ref = _reference(first, second, interval)
            for d in doc["disks"]:
                if d["dropped"] is not None:
                    if any(d[k] is not None for k in ref.get(d["name"], {})):
                        p.append(f"{d['name']} dropped, yet rates shown")
                    if "\n" in d["dropped"]:
                        p.append("a reason of several lines")
                    if not any(d["name"] in w and "no disk rates" in w for w in doc["warnings"]):
                        p.append(f"{d['name']} dropped without a warning")
                    continue
                p += within_bounds(d, interval)
            for name in keep:
                d = by_name.get(name)
                if d is None:
                    p.append(f"{name} missing")
                elif d["dropped"] is not None:
                    p.append(f"{name} dropped though possible: {d['dropped'][:100]}")
                else:
                    for k, v in ref[name].items():
                        if d[k] != v and not (isinstance(v, float) and math.isclose(d[k], v, rel_tol=1e-9)):
                            p.append(f"{name} {k} = {d[k]}, iostat gives {v}")
                            break
            for name in drop:
                d = by_name.get(name)
                if d is not None and d["dropped"] is None:
                    vals = {k: d[k] for k in ("r_s", "rkb_s", "util_pct", "r_await_ms")}
                    p.append(f"{name} kept though impossible: {vals}")
            if dup_warning and not any(dup_warning in w for w in doc["warnings"]):
                p.append("the duplicate name was not warned about")
            return p

        return judge(run, ok)
    return fn


def _text_ok(out: str, drop) -> list[str]:
    p = []
    for name in drop:
        row = next((r for r in out.splitlines() if r.startswith(name + " ")), None)
        if row is None:
            p.append(f"no row for {name}")
        elif "n/a" not in row or "dropped" not in row:
            p.append(f"{name}'s row shows numbers: {row[:120]}")
        if not any(r.startswith(f"warning: {name}: no disk rates") for r in out.splitlines()):
            p.append(f"no warning line for {name}")
    return p


def cases() -> list[Case]:
    out = Cases(CAT)
    calm = line(**BASE)

    def add(cid, desc, first, second, expect=HANDLED, **kw):
        out.add(cid, desc, rates_case(first, second, **kw), timeout_s=30, expect=expect)

    for seed in range(8):
        a, b = diskstats_gen.node_texts(seed, 2, interval_ms=500)
        add(f"node/seed{seed}", "a busy node's half second (since-boot counters)", a, b,
            keep=("nvme0n1", "sda", "sdb", "dm-0"))
    for f in TICKS:
        top = 2**32 - (50 if f == "tot_ticks" else STEP[f] // 2)
        first = line(**dict(BASE, **{f: top}))
        second = line(**advanced(**{f: (top + STEP[f]) % 2**32}))
        add(f"wrap32/{f}", f"{f} wraps at 2^32", first, second, keep=("sda",))
    for f in U64:
        second = line(**advanced(**{f: BASE[f] - 1}))
        add(f"down/{f}", f"{f} goes down by one", calm, second, drop=("sda",))
    for f in TICKS:
        second = line(**advanced(**{f: BASE[f] - 100}))
        add(f"down/{f}", f"{f} goes down by 100 ms", calm, second, drop=("sda",))
    for f in ("rd_ios", "rd_sectors", "wr_sectors"):
        first = line(**dict(BASE, **{f: 2**64 - 10}))
        second = line(**advanced(**{f: 5}))
        add(f"wrap64/{f}", f"{f} passes 2^64", first, second, drop=("sda",))
    add("appear/since-boot", "a device appears with its since-boot counters", calm,
        line(**advanced()) + line("sdb", 16, **dict(BASE, tot_ticks=495_410_670)),
        keep=("sda",), drop=("sdb",))
    add("appear/fresh", "a device appears, new", calm,
        line(**advanced()) + line("sdb", 16, **STEP), keep=("sda", "sdb"))
    add("appear/huge-ios", "a device appears with 1e12 reads", calm,
        line(**advanced()) + line("sdb", 16, rd_ios=10**12, rd_sectors=8 * 10**12),
        keep=("sda",), drop=("sdb",))
    add("recreated/small", "a device removed and created again (counters reset)", calm,
        line(**STEP), keep=("sda",))
    add("recreated/zero", "a device whose counters all went to zero", calm, line(), keep=("sda",))
    add("fields/20-to-14", "the line loses fields (20 to 14)", calm,
        line(nfields=14, **advanced()), drop=("sda",))
    add("fields/18-to-20", "the line gains fields (18 to 20)", line(nfields=18, **BASE),
        line(**advanced()), drop=("sda",))
    add("ceiling/ops", "2e9 reads in half a second", calm,
        line(**advanced(rd_ios=BASE["rd_ios"] + 10**9)), drop=("sda",))
    add("ceiling/bytes", "a petabyte read in half a second", calm,
        line(**advanced(rd_sectors=BASE["rd_sectors"] + 2 * 10**12)), drop=("sda",))
    add("ceiling/discard-bytes", "a huge discard (no byte ceiling)", calm,
        line(**advanced(dc_sectors=BASE["dc_sectors"] + 2 * 10**12)), keep=("sda",))
    add("busy/over", "1000 ms busy in half a second", calm,
        line(**advanced(tot_ticks=BASE["tot_ticks"] + 1000)), drop=("sda",))
    add("busy/at-interval", "500 ms busy in half a second", calm,
        line(**advanced(tot_ticks=BASE["tot_ticks"] + 500)), keep=("sda",))
    add("busy/negative-wrap", "busy time back by 1 ms", calm,
        line(**advanced(tot_ticks=BASE["tot_ticks"] - 1)), drop=("sda",))
    # duplicates
    two = line(**BASE) + line("sdb", 16, **BASE)
    older, newer = advanced(), advanced(rd_ios=BASE["rd_ios"] + 1500)
    add("dup/different", "a device named twice, different counters", two,
        line(**advanced()) + line("sdb", 16, **older) + line("sdb", 16, **newer),
        keep=("sda", "sdb"), dup_warning="both name sdb")
    add("dup/same", "a device named twice, the same line", two,
        line(**advanced()) + line("sdb", 16, **older) + line("sdb", 16, **older),
        keep=("sda", "sdb"), dup_warning="both name sdb")
    add("dup/three", "a device named three times", two,
        line(**advanced()) + line("sdb", 16, **older) + line("sdb", 16, **BASE) + line("sdb", 16, **newer),
        keep=("sda",), dup_warning="name sdb")
    add("dup/first-read", "the first read names a device twice", line(**BASE) + line(**advanced()),
        line(**advanced(advanced())), keep=("sda",))
    # torn rewrites of a busy node
    kinds = diskstats_gen.TORN_KINDS
    for seed in range(8):
        texts = diskstats_gen.node_texts(100 + seed, 3, interval_ms=500)
        for kind in kinds:
            rng = random.Random(seed * 31 + len(kind))
            second = diskstats_gen.torn(rng, texts[2], texts[0], kind)
            add(f"torn/{kind}/seed{seed}", f"second read torn ({kind}) while rewritten",
                texts[1], second)
    # the generator's sequences: intervals it knows no device could make
    for seed in range(15):
        snaps, truth = diskstats_gen.generate(seed, 6)
        i = max(range(len(truth)), key=lambda k: sum(v == "drop" for v in truth[k].values()))
        drop = tuple(n for n, v in truth[i].items() if v == "drop")
        add(f"generated/seed{seed}", f"generated sequence {seed}, interval {i} "
            f"({len(drop)} impossible)", snaps[i][1], snaps[i + 1][1], drop=drop)
    # the text report
    for cid, second in (("down", line(**advanced(rd_ios=BASE["rd_ios"] - 1))),
                        ("ticks-down", line(**advanced(rd_ticks=BASE["rd_ticks"] - 100))),
                        ("busy-over", line(**advanced(tot_ticks=BASE["tot_ticks"] + 5000)))):
        add(f"text/{cid}", f"--once text: {cid}", calm, second, drop=("sda",), text=True)
    add("text/appear", "--once text: a device appears with since-boot counters", calm,
        line(**advanced()) + line("sdb", 16, **dict(BASE, tot_ticks=495_410_670)),
        drop=("sdb",), text=True)
    return out
