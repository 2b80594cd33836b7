"""Category 6: recordings that mix sources, and damaged session headers.

Writing: the real `record` appending to a recording of another source (--demo into live,
live into --demo, another host's, another scenario or seed, a damaged or torn file): it
must refuse, or append without touching what was there.  Reading: files that mix sources
(cat of live and demo, of two and three hosts) through report and export: one source at a
time, what was left out said, never the numbers of two sources together.  Header damage:
single bits flipped in a session header (the frame header's every byte, a sample of the
JSON), through report and export: every sample kept, the damage reported, and a simulated
session never read as live (nor a live one as simulated).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
import shutil
import threading

import fixtures
from harness import HANDLED, REFUSED, Case, Cases, Ctx, Result, file_is, judge, parse_json

CAT = 6
T0 = 1767225600.0

_lock = threading.RLock()
_made: dict = {}


def made(name: str):
    with _lock:
        if name not in _made:
            _made[name] = _make(name)
        return _made[name]


def _make(name: str):
    from fault_helpers import LIVE, concat, header_frames, record, sim

    d = fixtures.fpath(f"sessions-{name}")
    os.makedirs(d, exist_ok=True)
    j = lambda *p: os.path.join(d, *p)  # noqa: E731
    if name == "sim30":
        p = record(j("s.gdtrec"), sim(30))
        return p, header_frames(p)[0]
    if name == "live20":
        p = record(j("l.gdtrec"), sim(20, scenario="healthy-cached"), header_origin=LIVE)
        return p, header_frames(p)[0]
    if name == "two-sessions":
        p = record(j("two.gdtrec"), sim(40))
        record(p, sim(25, seed=1, start_wall_s=T0 + 1000))
        return p, header_frames(p)[1]
    if name == "demo11":
        return record(j("demo.gdtrec"), sim(11)), None
    if name == "live-demo":
        live = fixtures.live_recording()
        demo = made("demo11")[0]
        from fault_helpers import concat as cat
        return cat(j("mixed.gdtrec"), live, demo), None
    if name == "demo-live-demo":
        live = fixtures.live_recording()
        a = record(j("d1.gdtrec"), sim(11))
        b = record(j("d2.gdtrec"), sim(9, start_wall_s=T0 + 5000))
        return concat(j("dld.gdtrec"), a, live, b), None
    if name.startswith("hosts"):
        n = int(name[-1])
        parts = [record(j(f"h{k}.gdtrec"), sim(20 + 5 * k, scenario="healthy-cached", seed=k),
                        header_origin=dataclasses.replace(LIVE, host_name=f"node-{17 + k}"))
                 for k in range(n)]
        return concat(j("hosts.gdtrec"), *parts), None
    raise ValueError(name)


def walls_of(path: str) -> list[float]:
    from gpudisk_top.record import Recording

    with Recording.open(path) as rec:
        return [rec.wall_s(i) for i in range(len(rec))]


# ------------------------------------------------------------------------ writing
def append_case(target: str, how: list[str], right: str):
    """`record -o EXISTING ...` where EXISTING holds another (or the same) source."""
    def fn(ctx: Ctx) -> Result:
        from fault_helpers import flip, header_frames

        path = ctx.path("target.gdtrec")
        if target == "live-here":
            shutil.copy(fixtures.this_host_live_recording(), path)
        elif target == "live-node17":
            shutil.copy(fixtures.live_recording(), path)
        elif target == "demo":
            shutil.copy(made("demo11")[0], path)
        elif target == "damaged-header":
            src = made("demo11")[0]
            h = header_frames(src)[0]
            flip(src, path, h.start + 150, 2)
        elif target == "torn-tail":
            src = made("demo11")[0]
            data = open(src, "rb").read()
            with open(path, "wb") as f:
                f.write(data[:-37])            # cut mid-frame, as kill -9 mid-write would
        elif target == "newer-version":
            src = made("demo11")[0]
            data = bytearray(open(src, "rb").read())
            data[8:10] = (9).to_bytes(2, "little")     # the preamble's format version
            with open(path, "wb") as f:
                f.write(bytes(data))
        before = open(path, "rb").read()
        try:
            prior = walls_of(path)
        except Exception:  # noqa: BLE001 - some targets cannot be read: nothing to keep
            prior = []
        run = ctx.gdt("record", "-o", path, "--duration", "0.6", "-i", "0.1", *how, timeout=30)

        def harm():
            if run.rc != 0:
                return file_is(path, before)
            try:
                now = walls_of(path)
            except Exception as err:  # noqa: BLE001
                return [f"the recording cannot be read after appending: {err}"]
            keep = prior[:-1] if target == "torn-tail" else prior
            if now[:len(keep)] != keep:
                return ["samples recorded before were lost or changed"]
            return []

        def ok():
            if right == "refuse":
                return [f"appended {how or 'live samples'} to a {target} recording"]
            now = walls_of(path)
            if len(now) <= len(prior):
                return ["nothing appended"]
            return []

        return judge(run, ok, harm)
    return fn


# ------------------------------------------------------------------------ reading
def read_case(name: str, args: list[str], check):
    def fn(ctx: Ctx) -> Result:
        path = made(name)[0]
        cmd = args[0]
        run = ctx.gdt(cmd, path, *args[1:], timeout=60)
        return judge(run, lambda: check(run))
    return fn


def expect_report(samples: int, kind: str, left_out: str | None = None, host: str | None = None):
    def check(run):
        d = parse_json(run.out)
        if d is None:
            return ["not JSON"]
        p = []
        if d["samples"] != samples:
            p.append(f"{d['samples']} samples, expected {samples}")
        if d["source_kind"] != kind:
            p.append(f"source_kind {d['source_kind']}, expected {kind}")
        if (kind == "live") == d["simulated"]:
            p.append(f"simulated is {d['simulated']} for a {kind} source")
        if left_out and (not d.get("left_out") or left_out not in d["left_out"]):
            p.append(f"left_out {d.get('left_out')!r} does not say {left_out!r}")
        if left_out and "mixes sources" not in run.err:
            p.append("no warning that the file mixes sources")
        if host and d["host_name"] != host:
            p.append(f"host {d['host_name']}, expected {host}")
        return p
    return check


def expect_export_hosts(hosts: set[str], rows: int | None = None):
    def check(run):
        if run.out.startswith("time,"):
            got = [r for r in csv.DictReader(io.StringIO(run.out)) if r["kind"] == "host"]
            names = {r["name"] for r in got}
        else:
            got = [json.loads(x) for x in run.out.splitlines() if x.strip()]
            names = {g.get("host", {}).get("host_name") or "?" for g in got}
            names = names - {"?"} or hosts
        p = []
        if names != hosts:
            p.append(f"exported hosts {sorted(names)}, expected {sorted(hosts)}")
        if rows is not None and len(got) != rows:
            p.append(f"{len(got)} intervals exported, expected {rows}")
        return p
    return check


def expect_perfetto(kind: str, intervals: int):
    def check(run):
        d = parse_json(run.out)
        if d is None:
            return ["not JSON"]
        p = []
        if d["otherData"].get("source_kind") != kind:
            p.append(f"source_kind {d['otherData'].get('source_kind')}, expected {kind}")
        names = [e["args"]["name"] for e in d["traceEvents"] if e.get("name") == "process_name"]
        label = {"simulated": "SIMULATED", "unknown": "SOURCE UNKNOWN"}.get(kind)
        if label and not all(label in n for n in names):
            p.append(f"a track not labelled {label}: {names[:2]}")
        if kind == "live" and any("SIMULATED" in n for n in names):
            p.append("a live track labelled SIMULATED")
        host = [e for e in d["traceEvents"] if e.get("ph") == "C" and e.get("name") == "host"]
        if len(host) != intervals:
            p.append(f"{len(host)} host counters, expected {intervals}")
        return p
    return check


def expect_text(*words: str):
    def check(run):
        return [f"the text does not say {w!r}" for w in words if w not in run.out]
    return check


# ------------------------------------------------------------------------ bit flips
def flip_case(name: str, where: tuple, command: str, n_tail: int):
    def fn(ctx: Ctx) -> Result:
        from fault_helpers import flip

        src, h = made(name)
        region, k, bit = where
        bad = flip(src, ctx.path("bad.gdtrec"), _resolve(h, region, k, n_tail), bit)
        if command == "report":
            run = ctx.gdt("report", bad, "--json", timeout=60)
        else:
            run = ctx.gdt("export", bad, "-f", "perfetto", "-o", "-", timeout=60)

        def ok():
            p = []
            d = parse_json(run.out)
            if d is None:
                return ["not JSON"]
            if command == "report":
                kind, n = d["source_kind"], d["samples"]
            else:
                # a session's first sample has no interval: samples = intervals + sessions read
                kind = d["otherData"].get("source_kind")
                n = sum(1 for e in d["traceEvents"] if e.get("ph") == "C" and e.get("name") == "host")
                n += 2 if (name == "two-sessions" and n == 63) else 1
            if name == "sim30":
                if kind == "live":
                    p.append("a simulated session read as LIVE")
                if n != 30:
                    p.append(f"{n} samples, recorded 30")
            elif name == "live20":
                if kind == "simulated":
                    p.append("a live session read as simulated")
                if n != 20:
                    p.append(f"{n} samples, recorded 20")
            else:  # the second session's header
                if kind == "live":
                    p.append("a simulated session read as LIVE")
                if n == 40 and command == "report":
                    if "(25 samples)" not in (d.get("left_out") or ""):
                        p.append("40 samples read and the other 25 not said to be left out")
                elif n not in (65, 40):
                    p.append(f"{n} samples, recorded 40 + 25")
            if "damaged" not in run.err and "header" not in run.err and "CRC" not in run.err \
                    and "torn" not in run.err and "damaged" not in run.out:
                p.append("the damage was not reported")
            return p

        return judge(run, ok)
    return fn


def sweep_case():
    """Every bit of the frame header and the first 300 bytes of the JSON, in this process
    through the reader the commands use (Recording.open): the figure behind the sample."""
    def fn(ctx: Ctx) -> Result:
        from fault_helpers import flip
        from gpudisk_top.record import Recording

        src, h = made("sim30")
        bad = ctx.path("bad.gdtrec")
        wrong, n = [], 0
        for byte in range(h.offset, h.start + 300):
            for bit in range(8):
                n += 1
                flip(src, bad, byte, bit)
                try:
                    with Recording.open(bad) as rec:
                        if len(rec) != 30 or rec.source.kind == "live" or not rec.source.damaged:
                            wrong.append((byte, bit, len(rec), rec.source.kind))
                except Exception as err:  # noqa: BLE001
                    wrong.append((byte, bit, type(err).__name__))
        if wrong:
            return Result("silent-wrong", f"{len(wrong)} of {n} flips: {wrong[:5]}")
        return Result("handled", f"all {n} single-bit flips: 30 samples, never live, damage said")
    return fn


def cases() -> list[Case]:
    out = Cases(CAT)
    # writing into a recording of another source
    for target, how, right in (
            ("live-here", ["--demo"], "refuse"),
            ("demo", [], "refuse"),
            ("live-node17", [], "refuse"),
            ("live-node17", ["--demo"], "refuse"),
            ("demo", ["--demo", "--seed", "1"], "either"),
            ("demo", ["--demo", "disk-starved-sata"], "either"),
            ("demo", ["--demo"], "append"),
            ("live-here", [], "append"),
            ("damaged-header", ["--demo"], "either"),
            ("damaged-header", [], "refuse"),
            ("torn-tail", ["--demo"], "append"),
            ("newer-version", ["--demo"], "refuse")):
        label = "-".join(how) or "live"
        out.add(f"append/{label}-into-{target}", f"record {' '.join(how) or '(live)'} "
                f"-o <{target} recording>", append_case(target, how, right), timeout_s=40,
                right=right)
    # reading files that mix sources
    reads = [
        ("live-demo", ["report", "--json"], expect_report(11, "live", "(11 samples)", "node-17")),
        ("live-demo", ["report", "--json", "--source", "simulated"], expect_report(11, "simulated", "--source live")),
        ("live-demo", ["report", "--json", "--source", "live"], expect_report(11, "live", "--source simulated")),
        ("live-demo", ["report", "--json", "--source", "demo-node"], expect_report(11, "simulated")),
        ("live-demo", ["report", "--json", "--recompute"], expect_report(11, "live", "(11 samples)")),
        ("live-demo", ["report", "--no-charts", "--source", "simulated"], expect_text("SIMULATED")),
        ("live-demo", ["export", "-f", "csv", "-o", "-"], expect_export_hosts({"node-17"}, 10)),
        ("live-demo", ["export", "-f", "jsonl", "-o", "-", "--source", "simulated"], expect_export_hosts({"demo-node"}, 10)),
        ("live-demo", ["export", "-f", "perfetto", "-o", "-"], expect_perfetto("live", 10)),
        ("live-demo", ["export", "-f", "perfetto", "-o", "-", "--source", "simulated"], expect_perfetto("simulated", 10)),
        ("demo-live-demo", ["report", "--json"], expect_report(11, "live", "(20 samples)")),
        ("demo-live-demo", ["report", "--json", "--source", "simulated"], expect_report(20, "simulated")),
        ("demo-live-demo", ["export", "-f", "csv", "-o", "-"], expect_export_hosts({"node-17"}, 10)),
        ("hosts2", ["report", "--json"], expect_report(20, "live", "node-18", "node-17")),
        ("hosts2", ["report", "--json", "--source", "node-18"], expect_report(25, "live", None, "node-18")),
        ("hosts2", ["export", "-f", "csv", "-o", "-"], expect_export_hosts({"node-17"}, 19)),
        ("hosts2", ["export", "-f", "csv", "-o", "-", "--source", "node-18"], expect_export_hosts({"node-18"}, 24)),
        ("hosts3", ["report", "--json", "--source", "node-19"], expect_report(30, "live", None, "node-19")),
        ("hosts3", ["report", "--json"], expect_report(20, "live", "node-19", "node-17")),
        ("hosts3", ["export", "-f", "perfetto", "-o", "-", "--source", "node-18"], expect_perfetto("live", 24)),
    ]
    for k, (name, args, check) in enumerate(reads):
        out.add(f"read/{name}/{k:02d}-{'-'.join(a.strip('-') for a in args if a != '-o' and a != '-')}",
                f"{' '.join(args)} on a file that mixes sources ({name})",
                read_case(name, args, check), timeout_s=60, expect=HANDLED)
    for name, cmd in (("live-demo", "report"), ("live-demo", "export"), ("hosts2", "report"),
                      ("hosts3", "export")):
        extra = ["-f", "csv", "-o", "-"] if cmd == "export" else []
        out.add(f"read/{name}/{cmd}-source-matches-nothing",
                f"{cmd} --source node-99 on a file that mixes sources",
                read_case(name, [cmd, *extra, "--source", "node-99"],
                          lambda run: ["a --source that matches nothing was accepted"]),
                timeout_s=60, expect=REFUSED)
    # flipped bits in session headers
    for name, frame_bits, n_json, n_tail in (("sim30", (0, 3, 6), 40, 16), ("live20", (1,), 16, 4),
                                             ("two-sessions", (5,), 14, 4)):
        for i, (region, k, bit) in enumerate(_flip_list(frame_bits, n_json, n_tail)):
            command = "export" if i % 4 == 3 else "report"
            out.add(f"flip/{name}/{region}{k}-bit{bit}-{command}",
                    f"bit {bit} of byte {k} of the header's {region} flipped ({name}), {command}",
                    flip_case(name, (region, k, bit), command, n_tail), timeout_s=60,
                    expect=HANDLED)
    out.add("flip/sim30/sweep-all-bits-in-process",
            "every bit of the header frame and the JSON's first 300 bytes, through Recording.open",
            sweep_case(), timeout_s=300, expect=HANDLED)
    return out


def _flip_list(frame_bits, n_json, n_tail):
    """Where to flip, relative to the header frame (resolved when the case runs): every
    byte of the 20-byte frame header (its kind, length and CRC) at the given bits, n_json
    bytes spread over the JSON's first 300 (source, simulated, host, kernel), n_tail
    spread over the rest of the JSON."""
    out = [("frame", k, bit) for k in range(20) for bit in frame_bits]
    step = max(1, 300 // max(1, n_json))
    out += [("json", k, k % 8) for k in range(0, 300, step)[:n_json]]
    out += [("tail", k, (k * 5) % 8) for k in range(n_tail)]
    return out


def _resolve(h, region: str, k: int, n_tail: int) -> int:
    if region == "frame":
        return h.offset + k
    if region == "json":
        return h.start + k
    return h.start + 300 + (h.end - h.start - 300) * k // max(1, n_tail)
