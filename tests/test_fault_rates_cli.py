"""The fault reproductions of issue 9, item 7, through `gpudisk-top --once` with --procfs
pointing at crafted files: the JSON keeps a dropped device with null rates and the
reason, the text shows n/a and the reason, and every other number is iostat's.

--once reads diskstats, sleeps --interval, and reads it again.  A small wrapper runs the
real `cli.main` with time.sleep wrapped so that, once the sleep is over, the file holds
the second text (rewritten in place, as the sampler keeps it open): the two reads see
exactly the two crafted texts, with no race against the clock.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys

import pytest

import diskstats_gen
from gpudisk_top.collect.diskstats import parse_checked
from gpudisk_top.diskstats import RATE_FIELDS, parse, rates
from diskstats_lines import BASE, SWAP_AFTER_SLEEP, line
from test_fault_rates import advanced, within_bounds

# an interval long enough that a loaded machine's delays keep STEP plausible
INTERVAL = "0.5"
CALM = dict(tot_ticks=BASE["tot_ticks"] + 100)   # 100 ms busy: under the interval


def once(tmp_path, first: str, second: str, *args: str) -> subprocess.CompletedProcess:
    procfs = tmp_path / "proc"
    procfs.mkdir()
    (procfs / "diskstats").write_text(first)
    for name in ("stat", "meminfo"):
        shutil.copy(f"/proc/{name}", procfs / name)
    (tmp_path / "second").write_text(second)
    proc = subprocess.run(
        [sys.executable, "-c", SWAP_AFTER_SLEEP, str(procfs / "diskstats"), str(tmp_path / "second"),
         "--once", "--interval", INTERVAL, "--procfs", str(procfs),
         "--sysfs", str(tmp_path / "nosys"), *args],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc


def json_once(tmp_path, first: str, second: str) -> dict:
    return json.loads(once(tmp_path, first, second, "--json").stdout)


def assert_iostat(doc: dict, first: str, second: str, name: str) -> None:
    disk = next(d for d in doc["disks"] if d["name"] == name)
    want = rates(parse(first), parse_checked(second, whole_lines=True)[0], doc["interval_s"])
    assert disk["dropped"] is None
    assert {k: disk[k] for k in RATE_FIELDS} == want[name].as_dict()


def assert_dropped(doc: dict, name: str, *words: str) -> str:
    disk = next(d for d in doc["disks"] if d["name"] == name)
    assert all(disk[k] is None for k in RATE_FIELDS), disk
    why = disk["dropped"]
    assert isinstance(why, str) and "\n" not in why and all(w in why for w in words), why
    assert f"{name}: no disk rates this interval: {why}" in doc["warnings"]
    return why


def test_once_device_appearing_with_large_counters(tmp_path):
    first = line(**BASE)
    second = line(**advanced(**CALM)) + line("sdb", 16, **dict(BASE, tot_ticks=495_410_670))
    doc = json_once(tmp_path, first, second)
    assert [d["name"] for d in doc["disks"]] == ["sda", "sdb"]
    assert_dropped(doc, "sdb", "%util", "compared against zeros")
    assert_iostat(doc, first, second, "sda")


def test_once_counters_going_down(tmp_path):
    first = line(**BASE) + line("sdb", 16, **BASE)
    second = (line(**advanced(**CALM, rd_ios=BASE["rd_ios"] - 1))
              + line("sdb", 16, **advanced(**CALM)))
    doc = json_once(tmp_path, first, second)
    assert_dropped(doc, "sda", f"rd_ios went down from {BASE['rd_ios']} to {BASE['rd_ios'] - 1}")
    assert_iostat(doc, first, second, "sdb")


def test_once_text_shows_n_a_and_the_reason(tmp_path):
    first = line(**BASE) + line("sdb", 16, **BASE)
    second = (line(**advanced(**CALM, rd_ticks=BASE["rd_ticks"] - 100))
              + line("sdb", 16, **advanced(**CALM)))
    out = once(tmp_path, first, second).stdout
    row = next(r for r in out.splitlines() if r.startswith("sda "))
    assert row.split()[2:24] == ["n/a"] * 22, row
    assert "(dropped: rd_ticks went down" in row
    assert any(r.startswith("warning: sda: no disk rates this interval: rd_ticks went down")
               for r in out.splitlines())
    sdb = next(r for r in out.splitlines() if r.startswith("sdb "))
    assert "n/a" not in sdb and "dropped" not in sdb


def test_once_duplicate_device_names(tmp_path):
    first = line(**BASE) + line("sdb", 16, **BASE)
    older, newer = advanced(**CALM), advanced(**CALM, rd_ios=BASE["rd_ios"] + 3000)
    second = line(**advanced(**CALM)) + line("sdb", 16, **older) + line("sdb", 16, **newer)
    proc = once(tmp_path, first, second, "--json")
    doc = json.loads(proc.stdout)
    warning = "diskstats lines 2 and 3 both name sdb; the last one is used, as iostat does"
    assert warning in doc["warnings"] and warning in proc.stderr
    assert_iostat(doc, first, second, "sdb")      # the last line's numbers
    sdb = next(d for d in doc["disks"] if d["name"] == "sdb")
    assert sdb["r_s"] == pytest.approx(3000 / doc["interval_s"])


def test_once_read_of_a_file_being_rewritten(tmp_path):
    """The first read found the file truncated (empty), the second the full text: every
    device appears with its since-boot counters.  The md array keeps no busy time, so
    only the ceilings can judge it; every other device is dropped for its busy time."""
    text = diskstats_gen.node_texts(5, 1)[0]
    doc = json_once(tmp_path, "", text)
    names = {d["name"] for d in doc["disks"]}
    assert names >= {"nvme0n1", "sda", "sdb", "dm-0", "md0"}
    for disk in doc["disks"]:
        if disk["dropped"] is None:
            assert disk["name"] == "md0"
            assert within_bounds(rates({}, parse(text), doc["interval_s"])["md0"], doc["interval_s"])
        else:
            assert "compared against zeros" in disk["dropped"]
            assert disk["name"] == "md0" or disk["dropped"].startswith("%util ")


def test_once_torn_reads_never_print_an_impossible_rate(tmp_path):
    """Torn second reads of a busy node: the seam of a rewrite at any byte, one cut off
    mid-line, lines of the two texts interleaved.  Every device shown is either dropped
    with its reason or has iostat's numbers for what was read, within the bounds."""
    texts = diskstats_gen.node_texts(6, 3)
    rng = random.Random(6)
    dropped = 0
    for i, kind in enumerate(("bytes", "cut", "interleaved", "lines")):
        second = diskstats_gen.torn(rng, texts[2], texts[0], kind)   # new text over an old one
        run_dir = tmp_path / f"{i}-{kind}"
        run_dir.mkdir()
        doc = json_once(run_dir, texts[1], second)
        read = parse_checked(second, whole_lines=True)[0]
        for disk in doc["disks"]:
            if disk["dropped"] is not None:
                dropped += 1
                assert all(disk[k] is None for k in RATE_FIELDS)
                continue
            assert_iostat(doc, texts[1], second, disk["name"])
            r = rates(parse(texts[1]), read, doc["interval_s"])[disk["name"]]
            assert within_bounds(r, doc["interval_s"]), (kind, disk)
    assert dropped
