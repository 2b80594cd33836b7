"""NFS (/proc/self/mountstats) and Lustre (llite/osc stats) collectors and their rates,
on published samples (tests/fixtures/netfs/README.md says where each comes from)."""

from __future__ import annotations

import dataclasses
import os
import random

import pytest

from gpudisk_top.collect import lustre, nfsstats
from gpudisk_top.collect.lustre import LustreCounter
from gpudisk_top.collect.nfsstats import NfsBytesRaw, NfsOpRaw, NfsXprtRaw
from gpudisk_top.collect.roots import FileCache, Roots
from gpudisk_top.model.lustre import lustre_rates
from gpudisk_top.model.nfs import nfs_rates

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "netfs")


def text(name: str) -> str:
    # as roots.read_text decodes a file
    with open(os.path.join(FIXTURES, name), "rb") as f:
        return f.read().decode("utf-8", errors="replace")


def mounts(name: str) -> dict[str, nfsstats.NfsMountRaw]:
    return nfsstats.parse(text(name))


def lustre_file(name: str) -> lustre.LustreStatsRaw:
    return lustre.parse(text(os.path.join("lustre", name)), name=name, kind="llite")


# ---------------------------------------------------------------------------- NFS parse
def test_procfs_nfs4_statvers_11_rpc_10_tcp():
    got = mounts("mountstats_procfs_nfs4_v11")
    assert list(got) == ["/mnt/nfs/test"]     # rootfs, sysfs, proc and ext4 are skipped
    m = got["/mnt/nfs/test"]
    assert (m.source, m.fstype, m.statvers, m.rpc_iostats_version) == (
        "192.168.1.1:/srv/test", "nfs4", "1.1", "1.0")
    assert m.age_s == 13968
    assert m.opts["vers"] == "4.0" and m.opts["rsize"] == "1048576"
    assert m.opts["proto"] == "tcp" and m.opts["hard"] == "" and m.opts["port"] == "0"
    assert m.events[:3] == (52, 226, 0) and len(m.events) == 27
    assert m.io_bytes == NfsBytesRaw(1207640230, 0, 0, 0, 1210214218, 0, 295483, 0)
    assert m.xprt == NfsXprtRaw(
        transport="tcp", port=832, bind_count=0, connect_count=1, connect_time_s=0,
        idle_time_s=11, sends=6428, recvs=6428, bad_xids=0, req_u=12154, bklog_u=0,
        max_slots=24, sending_u=26, pending_u=5726)
    assert m.xprts == (m.xprt,)
    assert list(m.ops) == ["NULL", "READ", "WRITE", "ACCESS"]
    # RPC iostats 1.0: eight numbers, no errors column
    assert m.ops["READ"] == NfsOpRaw(1298, 1298, 0, 207680, 1210292152, 6, 79386, 79407, None)
    # a queue time near 2**64, as this kernel printed it: kept as printed
    assert m.ops["ACCESS"].queue_ms == 18446743919241604546


def test_mixed_file_statvers_transports_and_errors_column():
    got = mounts("mountstats_nfsmountstats_mixed")
    assert list(got) == ["/mnt/nfs1/docs", "/mnt/nfs1/system_setup", "/mnt/nfs1/code",
                         "/mnt/nfs1/docs_work", "/webmail0", "/mailhome6", "/mailhome5",
                         "/fakehomestatver1", "/mailhome5udp", "/mailhome5rdma"]
    docs = got["/mnt/nfs1/docs"]
    assert (docs.source, docs.fstype, docs.rpc_iostats_version) == (
        "10.0.2.31:/volume1/Public/docs", "nfs4", "1.1")
    assert docs.opts["vers"] == "4.2" and docs.opts["rsize"] == "1048576"
    # RPC iostats 1.1: the ninth number is errors
    assert docs.ops["READ"] == NfsOpRaw(484, 484, 0, 121212, 11259100, 23, 2152, 2190, 0)
    assert docs.ops["WRITE"] == NfsOpRaw(513, 513, 0, 121747828, 97008, 260140, 5367, 265518, 0)
    assert docs.ops["GETATTR"] == NfsOpRaw(13920, 13924, 0, 3187904, 3394844, 6668, 27030, 34563, 7)
    assert docs.ops["LOOKUP"] == NfsOpRaw(5109, 5109, 0, 1274016, 1197256, 96, 9244, 9647, 1728)
    assert docs.ops["ACCESS"] == NfsOpRaw(3268, 3268, 0, 770724, 536632, 85, 7017, 7294, 1)
    assert docs.ops["OPEN"] == NfsOpRaw(916, 916, 0, 310636, 251444, 56, 1957, 2033, 374)
    assert len(docs.ops) == 69
    assert docs.xprt.sends == 35130 and docs.xprt.max_slots == 31

    # statvers=1.0: tcp with ten numbers, no max_slots / sending_u / pending_u
    old = got["/fakehomestatver1"]
    assert old.statvers == "1.0" and old.source == "10.0.47.9:/fakehomestatver1"
    assert old.xprt == NfsXprtRaw("tcp", 840, 1, 1, 0, 0, 1013715537, 1013715535, 2,
                                  18247684089, 0, None, None, None)
    assert old.ops["READ"] == NfsOpRaw(1457648, 1457648, 0, 198240128, 16942484460, 98905,
                                       6121614, 6259737, None)

    # udp: no connect fields
    udp = got["/mailhome5udp"].xprt
    assert udp == NfsXprtRaw("udp", 840, 1, None, None, None, 1013715537, 1013715535, 2,
                             18247684089, 0, None, None, None)

    # rdma: the kernel's order up to bklog_u, then its own counters
    rdma = got["/mailhome5rdma"].xprt
    assert (rdma.transport, rdma.port, rdma.sends, rdma.recvs, rdma.bad_xids) == (
        "rdma", 741, 1013715537, 1013715535, 2)
    assert (rdma.req_u, rdma.bklog_u, rdma.max_slots) == (0, 101371553, None)
    assert rdma.extra == (101371553, 101371550, 60, 61, 1, 1, 1, 0, 0)

    tcp11 = got["/mailhome6"].xprt
    assert (tcp11.max_slots, tcp11.sending_u, tcp11.pending_u) == (1417, 59765520263, 15660436504)


def test_rdma_nconnect_sums_the_transports():
    m = mounts("mountstats_procfs_rdma_nconnect")["<mountpoint>"]
    assert m.opts["nconnect"] == "16" and m.opts["proto"] == "rdma"
    assert len(m.xprts) == 16
    assert m.xprts[0].sends == 494490723 and m.xprts[0].bklog_u == 1282789
    x = m.xprt
    assert (x.transport, x.port, x.bind_count, x.connect_count, x.connect_time_s) == (
        "rdma", 0, 0, 175008, 1855)
    assert (x.idle_time_s, x.sends, x.recvs, x.bad_xids, x.req_u, x.bklog_u) == (
        0, 7729061226, 7729060532, 694, 179113226379, 4076596918)
    assert m.ops["READ"] == NfsOpRaw(2654501510, 2654501510, 0, 445911966900,
                                     2013540728551504, 6347457114, 31407021389,
                                     37927280438, 0)


def test_mount_with_no_stats_lines():
    got = mounts("mountstats_procfs_no_stats")
    m = got["/mnt/nfs"]
    assert (m.source, m.fstype, m.statvers) == ("192.168.1.1:/srv", "nfs", "1.1")
    assert m.ops == {} and m.xprt is None and m.xprts == () and m.io_bytes is None
    assert m.age_s is None and m.opts == {} and m.events == ()


def test_escaped_names_and_a_mount_without_a_source():
    got = nfsstats.parse(
        "device srv:/a\\040b mounted on /mnt/a\\040b with fstype nfs statvers=1.1\n"
        "no device mounted on /mnt/x with fstype nfs4 statvers=1.1\n"
        "device srv:/c mounted on /mnt/c with fstype nfs\n")       # no statvers: no stats
    assert list(got) == ["/mnt/a b", "/mnt/x"]
    assert got["/mnt/a b"].source == "srv:/a b" and got["/mnt/x"].source == ""


def test_garbled_file_keeps_what_parses():
    got = mounts("mountstats_garbled")
    assert list(got) == ["/mnt/nfs/test", "/mnt/nfs2", "/mnt/nfs3"]
    m = got["/mnt/nfs/test"]
    assert m.opts == {"rw": "", "vers": "4.0", "rsize": "abc", "proto": "tcp"}
    assert m.age_s is None and m.events == () and m.io_bytes is None
    assert m.xprt is None                              # "tcp 832 0 1": too few fields
    # WRITE (an "x"), ACCESS (two numbers), "GETATTR" (no colon), ":" (no name) and
    # LOOKUP (a negative count) are left out
    assert list(m.ops) == ["NULL", "READ"]
    assert m.ops["READ"] == NfsOpRaw(1298, 1298, 0, 207680, 1210292152, 6, 79386, 79407)
    m2 = got["/mnt/nfs2"]
    assert m2.xprts == ()          # a negative port, too few udp fields, an unknown transport
    # numbers past errors (a future kernel's) are ignored
    assert m2.ops["READ"] == NfsOpRaw(1, 1, 0, 100, 200, 1, 2, 3, 4)
    # the file ends without a newline: its last line was cut and is not used
    m3 = got["/mnt/nfs3"]
    assert list(m3.ops) == ["GETATTR"]
    assert m3.io_bytes == NfsBytesRaw(1, 2, 3, 4, 5, 6, 7, 8)


def test_garbled_input_never_raises():
    rng = random.Random(14)
    base = text("mountstats_nfsmountstats_mixed")
    assert nfsstats.parse("") == {}
    assert nfsstats.parse("\n\n\x00\xff") == {}
    for _ in range(300):
        cut = base[: rng.randrange(len(base))]
        nfsstats.parse(cut)
        chars = list(base[rng.randrange(len(base) - 4000):][:4000])
        for _ in range(40):
            chars[rng.randrange(len(chars))] = rng.choice("x -:\t\n0\\\x00é")
        nfsstats.parse("".join(chars))
        tokens = base.split()
        rng.shuffle(tokens)
        nfsstats.parse(" ".join(tokens[:500]).replace(" device", "\ndevice"))


def test_read_from_procfs_root(tmp_path):
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "mountstats").write_text(text("mountstats_procfs_nfs4_v11"))
    roots = Roots(procfs=str(proc), sysfs=str(tmp_path / "sys"))
    assert list(nfsstats.read(roots)) == ["/mnt/nfs/test"]
    cache = FileCache()
    try:
        assert nfsstats.read(roots, cache)["/mnt/nfs/test"].xprt.sends == 6428
    finally:
        cache.close()
    assert nfsstats.read(Roots(procfs=str(tmp_path / "none"))) == {}


# ---------------------------------------------------------------------------- NFS rates
def test_rates_between_two_snapshots():
    """The .next fixture is the same file one second later, with /mnt/nfs1/docs changed
    by: READ +100 ops, +102 trans (2 retransmissions), +12400 bytes sent, +409600 bytes
    received, +10 ms queue, +250 ms rtt, +300 ms execute, +1 error; xprt +102 sends,
    +102 recvs, +204 req_u, +51 bklog_u; bytes: normal_read and server_read +409600."""
    prev = mounts("mountstats_nfsmountstats_mixed")["/mnt/nfs1/docs"]
    cur = mounts("mountstats_nfsmountstats_mixed.next")["/mnt/nfs1/docs"]
    r = nfs_rates(cur, prev, 1.0)
    assert r.mountpoint == "/mnt/nfs1/docs" and r.interval_s == 1.0
    assert r.ops_s == 102.0
    assert r.backlog_avg == 0.5                    # 51 / 102
    assert r.read_ops_s == 100.0
    assert r.read_kb_s == pytest.approx((12400 + 409600) / 1024)      # nfsiostat's kB/s
    assert r.read_kb_per_op == pytest.approx((12400 + 409600) / 1024 / 100)
    assert r.server_read_kb_s == 400.0 and r.app_read_kb_s == 400.0
    assert r.read_retrans_s == 2.0 and r.retrans_s == 2.0
    assert r.read_rtt_ms_per_op == 2.5
    assert r.read_execute_ms_per_op == 3.0
    assert r.read_queue_ms_per_op == pytest.approx(0.1)
    read = r.ops["READ"]
    assert (read.retrans, read.retrans_pct, read.errors, read.errors_s) == (2, 2.0, 1, 1.0)
    # the ops that did not move: 0 a second, no per-op means (nfsiostat prints 0.000)
    assert r.write_ops_s == 0.0 and r.write_kb_s == 0.0
    assert r.write_rtt_ms_per_op is None and r.write_execute_ms_per_op is None
    assert r.ops["GETATTR"].ops_s == 0.0 and r.ops["GETATTR"].rtt_ms_per_op is None
    assert len(r.ops) == 69


def test_half_interval_doubles_the_rates():
    prev = mounts("mountstats_nfsmountstats_mixed")["/mnt/nfs1/docs"]
    cur = mounts("mountstats_nfsmountstats_mixed.next")["/mnt/nfs1/docs"]
    r = nfs_rates(cur, prev, 0.5)
    assert r.read_ops_s == 200.0 and r.app_read_kb_s == 800.0
    assert r.read_rtt_ms_per_op == 2.5 and r.backlog_avg == 0.5   # per op: unchanged


def test_remount_gives_none_never_negative():
    """/mailhome5udp in the .next fixture was mounted again: age 5 s, READ 10 ops, xprt
    40 sends; every counter is below the first sample's."""
    prev = mounts("mountstats_nfsmountstats_mixed")["/mailhome5udp"]
    cur = mounts("mountstats_nfsmountstats_mixed.next")["/mailhome5udp"]
    r = nfs_rates(cur, prev, 1.0)
    values = [getattr(r, f.name) for f in dataclasses.fields(r)
              if f.name not in ("mountpoint", "interval_s", "ops", "dropped")]
    assert values and all(v is None for v in values)
    assert r.ops == {} and "mounted again" in r.dropped


def test_one_counter_down_gives_none_for_what_uses_it():
    prev = mounts("mountstats_nfsmountstats_mixed")["/mnt/nfs1/docs"]
    cur = mounts("mountstats_nfsmountstats_mixed.next")["/mnt/nfs1/docs"]
    cur.ops["READ"] = dataclasses.replace(cur.ops["READ"], rtt_ms=prev.ops["READ"].rtt_ms - 1)
    cur.xprt = dataclasses.replace(cur.xprt, sends=prev.xprt.sends - 1)
    r = nfs_rates(cur, prev, 1.0)
    assert r.read_rtt_ms_per_op is None
    assert r.read_ops_s == 100.0 and r.read_execute_ms_per_op == 3.0
    assert r.ops_s is None and r.backlog_avg is None
    # trans below ops (the kernel updates them apart): no negative retransmissions
    cur.ops["READ"] = dataclasses.replace(cur.ops["READ"], trans=prev.ops["READ"].trans + 50)
    r = nfs_rates(cur, prev, 1.0)
    assert r.ops["READ"].retrans is None and r.ops["READ"].retrans_pct is None
    assert r.retrans_s is None


def test_other_mount_or_bad_interval_gives_none():
    prev = mounts("mountstats_nfsmountstats_mixed")["/mnt/nfs1/docs"]
    cur = mounts("mountstats_nfsmountstats_mixed.next")["/mnt/nfs1/docs"]
    assert nfs_rates(cur, prev, 0).read_ops_s is None
    assert nfs_rates(cur, prev, -1.0).ops == {}
    other = dataclasses.replace(cur, source="10.0.2.32:/elsewhere")
    assert nfs_rates(other, prev, 1.0).read_ops_s is None


def test_rates_on_garbled_and_empty_mounts_never_raise():
    garbled = mounts("mountstats_garbled")
    empty = mounts("mountstats_procfs_no_stats")["/mnt/nfs"]
    for m in list(garbled.values()) + [empty]:
        r = nfs_rates(m, m, 1.0)
        assert r.ops_s is None or r.ops_s == 0.0
    r = nfs_rates(empty, empty, 1.0)
    assert r.ops == {} and r.ops_s is None and r.app_read_kb_s is None


# ---------------------------------------------------------------------------- Lustre
def test_llite_210_count_only_counters():
    s = lustre_file("llite_2.10_stats")
    assert s.snapshot_s == pytest.approx(1510950459.772792457)
    assert s.counters["read_bytes"] == LustreCounter(1, "bytes", 4194304, 4194304, 4194304, None)
    assert s.counters["write_bytes"] == LustreCounter(89467810, "bytes", 4096, 1048576,
                                                      93813797294080, None)
    assert s.counters["open"] == LustreCounter(136, "regs")
    assert s.counters["inode_permission"] == LustreCounter(398, "regs")
    assert len(s.counters) == 12


def test_llite_214_usecs_and_big_sumsq():
    s = lustre_file("llite_2.14_stats")
    assert s.snapshot_s == pytest.approx(1710759783.271040288)
    assert s.counters["ioctl"] == LustreCounter(114, "reqs")
    assert s.counters["open"] == LustreCounter(35955554, "usecs", 0, 172939, 3393651645,
                                               8836730033307)
    assert s.counters["getattr"].samples == 35955647
    assert s.counters["openclosetime"].sumsq == 2084188699388296969
    assert "read_bytes" not in s.counters            # a counter with no samples is not printed


def test_osc_stats():
    s = lustre.parse(text("lustre/osc_2.10_stats"), name="lustrefs-OST0000-osc-ffff88105db50000",
                     kind="osc")
    assert (s.kind, s.name) == ("osc", "lustrefs-OST0000-osc-ffff88105db50000")
    assert s.counters["ost_write"] == LustreCounter(18210286, "usec", 119, 1348857,
                                                    110277857878, 8341476394008222)
    assert s.counters["write_bytes"].sumsq == 10009909738331963392
    assert s.counters["req_active"] == LustreCounter(18215582, "reqs", 1, 17, 83626277, 470089669)
    assert len(s.counters) == 9


def test_lustre_garbled_never_raises_and_keeps_what_parses():
    s = lustre.parse(text("lustre/garbled_stats"))
    assert s.snapshot_s == pytest.approx(1510950459.772792457)
    assert list(s.counters) == ["write_bytes", "close", "getattr", "read_bytes"]
    assert s.counters["close"] == LustreCounter(96, "regs")       # two numbers: not min/max/sum
    assert s.counters["getattr"] == LustreCounter(41, "usec")     # "zz" as the sum
    # a sum of squares that overflowed, printed negative by some versions: kept as printed
    assert s.counters["read_bytes"] == LustreCounter(7, "bytes", 1, 2, 3, -3193831078871982772)
    rng = random.Random(14)
    base = text("lustre/llite_2.14_read_latency_stats")
    assert lustre.parse("").counters == {} and lustre.parse("").snapshot_s is None
    for _ in range(300):
        chars = list(base)
        for _ in range(30):
            chars[rng.randrange(len(chars))] = rng.choice("x -[]\t\n0.\x00")
        lustre.parse("".join(chars))
        lustre.parse(base[: rng.randrange(len(base))])


def test_lustre_rates_with_read_latency():
    """The .next fixture is one second later with: read_bytes +100 samples, +409600
    bytes; read +100 samples, +25000 usecs."""
    prev = lustre_file("llite_2.14_read_latency_stats")
    cur = lustre_file("llite_2.14_read_latency_stats.next")
    r = lustre_rates(cur, prev)
    assert r.interval_s == pytest.approx(1.0, abs=1e-6)     # from snapshot_time
    assert r.read_ops_s == pytest.approx(100.0, rel=1e-6)
    assert r.read_kb_s == pytest.approx(400.0, rel=1e-6)
    assert r.read_latency_ms_per_op == 0.25
    assert r.write_ops_s == 0.0 and r.write_kb_s == 0.0
    assert r.write_latency_ms_per_op is None              # no writes in the interval
    r2 = lustre_rates(cur, prev, interval_s=2.0)
    assert (r2.read_ops_s, r2.read_kb_s, r2.read_latency_ms_per_op) == (50.0, 200.0, 0.25)


def test_lustre_rates_counter_down_or_cleared_gives_none():
    prev = lustre_file("llite_2.14_read_latency_stats.next")
    cur = lustre_file("llite_2.14_read_latency_stats")          # swapped: every counter down
    r = lustre_rates(cur, prev, interval_s=1.0)
    assert r.read_ops_s is None and r.read_kb_s is None and r.read_latency_ms_per_op is None
    cleared = lustre.LustreStatsRaw(name="x", snapshot_s=prev.snapshot_s + 1, counters={})
    r = lustre_rates(cleared, prev)
    assert r.read_ops_s is None and r.write_kb_s is None
    # a count-only read_bytes (no sum): ops, no kB
    a = lustre.LustreStatsRaw("x", 10.0, {"read_bytes": LustreCounter(5, "regs")})
    b = lustre.LustreStatsRaw("x", 11.0, {"read_bytes": LustreCounter(9, "regs")})
    r = lustre_rates(b, a)
    assert r.read_ops_s == 4.0 and r.read_kb_s is None and r.read_latency_ms_per_op is None
    # no snapshot_time and no interval given: nothing
    assert lustre_rates(lustre.LustreStatsRaw("x", None), a).read_ops_s is None


def test_osc_ost_read_latency_and_counters_that_appear():
    # osc prints no read counters until the first read: absent means zero
    prev = lustre.parse("snapshot_time 100.0 secs.nsecs\n", kind="osc")
    cur = lustre.parse("snapshot_time 102.0 secs.nsecs\n"
                       "read_bytes 20 samples [bytes] 4096 1048576 8388608 1\n"
                       "ost_read 20 samples [usec] 100 9000 40000 1\n", kind="osc")
    r = lustre_rates(cur, prev)
    assert (r.read_ops_s, r.read_kb_s, r.read_latency_ms_per_op) == (10.0, 4096.0, 2.0)


def test_lustre_read_finds_proc_and_debugfs(tmp_path):
    proc, sys_ = tmp_path / "proc", tmp_path / "sys"
    llite = proc / "fs" / "lustre" / "llite" / "lustrefs-ffff88105db50000"
    llite.mkdir(parents=True)
    (llite / "stats").write_text(text("lustre/llite_2.10_stats"))
    debug = sys_ / "kernel" / "debug" / "lustre"
    (debug / "llite" / "lustrefs-ffff88105db50000").mkdir(parents=True)
    (debug / "llite" / "lustrefs-ffff88105db50000" / "stats").write_text(
        text("lustre/llite_2.14_stats"))                        # procfs's is taken
    (debug / "llite" / "ai400x2-ff47bce9ca35d800").mkdir(parents=True)
    (debug / "llite" / "ai400x2-ff47bce9ca35d800" / "stats").write_text(
        text("lustre/llite_2.14_stats"))
    (debug / "osc" / "lustrefs-OST0000-osc-ffff88105db50000").mkdir(parents=True)
    (debug / "osc" / "lustrefs-OST0000-osc-ffff88105db50000" / "stats").write_text(
        text("lustre/osc_2.10_stats"))
    (debug / "osc" / "no-stats-here").mkdir(parents=True)
    roots = Roots(procfs=str(proc), sysfs=str(sys_))
    got = lustre.read(roots)
    assert list(got) == ["llite/ai400x2-ff47bce9ca35d800", "llite/lustrefs-ffff88105db50000",
                         "osc/lustrefs-OST0000-osc-ffff88105db50000"]
    assert got["llite/lustrefs-ffff88105db50000"].counters["open"].unit == "regs"
    assert got["osc/lustrefs-OST0000-osc-ffff88105db50000"].kind == "osc"
    cache = FileCache()
    try:
        assert list(lustre.read(roots, cache)) == list(got)
    finally:
        cache.close()
    assert lustre.read(Roots(procfs=str(tmp_path / "none"), sysfs=str(tmp_path / "none"))) == {}


# ---------------------------------------------------------------------------- the sampler's
def test_the_quick_read_of_the_jobs_mounts_is_the_full_parse():
    """read_counters() takes READ of the wanted mounts straight from the text: the same
    counters as the full parse, for every NFS mount of every fixture."""
    for name in sorted(os.listdir(FIXTURES)):
        if not name.startswith("mountstats_"):
            continue
        full = {mp: nfsstats.mount_counters(m) for mp, m in mounts(name).items()}
        assert nfsstats.quick_counters(text(name), set(full)) == full, name
        assert nfsstats.quick_counters(text(name), set()) == {}
    assert any(nfsstats.quick_counters(text(n), {"/mnt/nfs1/docs"})
               for n in os.listdir(FIXTURES) if n.startswith("mountstats_nfsmountstats"))


def test_the_jobs_mounts_are_read_through_the_jobs_own_proc(tmp_path):
    """In a container (the DaemonSet reads the host's /proc at /host/proc) our own
    mountstats list our mounts, not the job's: the counters come from the job's PID."""
    from gpudisk_top.collect.roots import Roots
    from gpudisk_top.collect.sample import MountRaw

    name = "mountstats_nfsmountstats_mixed"
    (tmp_path / "self").mkdir()
    (tmp_path / "self" / "mountstats").write_text("device proc mounted on /proc with fstype proc\n")
    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "mountstats").write_text(text(name))
    mp = "/mnt/nfs1/docs"
    job = [MountRaw(mp, "nfs4", "server:/docs", "nfs")]
    roots = Roots(procfs=str(tmp_path))
    assert nfsstats.read_counters(roots, job) == {}
    assert nfsstats.read_counters(roots, job, pid=4242) == {mp: nfsstats.mount_counters(mounts(name)[mp])}


def test_mount_views_give_nfsiostats_numbers_from_recorded_counters():
    """What a recording keeps of a mount (MountRaw.counters) gives the model the same
    READ rates as the full parse does (model/nfs.py owns the formulas)."""
    from gpudisk_top.collect.sample import MountRaw
    from gpudisk_top.model.mounts import mount_views

    before, after = mounts("mountstats_nfsmountstats_mixed"), mounts("mountstats_nfsmountstats_mixed.next")
    mp = "/mnt/nfs1/docs"
    full = nfs_rates(after[mp], before[mp], 10.0)

    def raw(m):
        return {mp: MountRaw(mp, m.fstype, m.source, "nfs", counters=nfsstats.mount_counters(m))}
    view = mount_views(raw(after[mp]), raw(before[mp]), {}, 10.0)[mp]
    assert view.read_ops_s == full.read_ops_s == 10.0            # +100 READs in 10 s
    assert view.rtt_ms == full.read_rtt_ms_per_op == 2.5          # +250 ms of RTT over them
    assert (view.read_kb_s, view.exec_ms, view.queue_ms, view.retrans_s, view.backlog) == \
        (full.read_kb_s, full.read_execute_ms_per_op, full.read_queue_ms_per_op,
         full.read_retrans_s, full.backlog_avg)
