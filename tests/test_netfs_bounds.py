"""NFS, Lustre and FUSE numbers held to what a kernel can print and a machine can carry
(issue 25, item 11): counters beyond 64 bits are refused at the edge (mountstats, Lustre
stats, recordings), an interval whose rates pass the disks' ceilings (model/disk.py) gives
no rates and says why, a counter that went down is said, and FUSE's `waiting` is an int
or nothing.  On the published samples of tests/fixtures/netfs."""

from __future__ import annotations

import dataclasses
import math

from gpudisk_top.collect import lustre, nfsstats
from gpudisk_top.collect.lustre import LustreCounter
from gpudisk_top.collect.sample import MountRaw
from gpudisk_top.model.disk import MAX_DATA_BYTES_S, MAX_OPS_S
from gpudisk_top.model.lustre import lustre_rates
from gpudisk_top.model.mounts import mount_views
from gpudisk_top.model.nfs import nfs_rates
from test_netfs_stats import lustre_file, mounts, text

MP = "/mnt/nfs1/docs"
U64 = 1 << 64


def pair():
    return (mounts("mountstats_nfsmountstats_mixed")[MP],
            mounts("mountstats_nfsmountstats_mixed.next")[MP])


def all_rates_none(r) -> bool:
    skip = {"mountpoint", "interval_s", "ops", "dropped", "name", "kind"}
    values = [getattr(r, f.name) for f in dataclasses.fields(r) if f.name not in skip]
    return bool(values) and all(v is None for v in values)


def finite_and_bounded(r) -> bool:
    values = [getattr(r, f.name) for f in dataclasses.fields(r)
              if isinstance(getattr(r, f.name), float)]
    return all(math.isfinite(v) and 0 <= v <= MAX_DATA_BYTES_S for v in values)


def test_a_sound_interval_passes_untouched():
    prev, cur = pair()
    r = nfs_rates(cur, prev, 10.0)
    assert r.dropped is None and r.read_ops_s == 10.0 and finite_and_bounded(r)


def test_nfs_rates_beyond_any_device_are_dropped_with_the_reason():
    prev, cur = pair()
    read = cur.ops["READ"]
    # 1.8e19 bytes more in 10 s: 1.8e15 kB/s, a u64 counter's whole range
    huge = dataclasses.replace(read, bytes_recv=prev.ops["READ"].bytes_recv + U64 - 2**40)
    r = nfs_rates(dataclasses.replace(cur, ops={**cur.ops, "READ": huge}), prev, 10.0)
    assert all_rates_none(r) and r.ops == {}
    assert "READ kB/s" in r.dropped and "more than any device can do" in r.dropped
    # ops: 1e12 READs in a second
    many = dataclasses.replace(read, ops=prev.ops["READ"].ops + 10**12,
                               trans=prev.ops["READ"].trans + 10**12)
    r = nfs_rates(dataclasses.replace(cur, ops={**cur.ops, "READ": many}), prev, 1.0)
    assert all_rates_none(r) and "ops/s" in r.dropped and f"{MAX_OPS_S:.3g}" in r.dropped


def test_nfs_latency_longer_than_the_mount_and_a_backlog_beyond_its_queue_are_dropped():
    prev, cur = pair()
    read = cur.ops["READ"]
    slow = dataclasses.replace(read, rtt_ms=prev.ops["READ"].rtt_ms + 10**18)
    r = nfs_rates(dataclasses.replace(cur, ops={**cur.ops, "READ": slow}), prev, 10.0)
    assert all_rates_none(r) and "longer than the mount has existed" in r.dropped
    xprt = dataclasses.replace(cur.xprt, bklog_u=prev.xprt.bklog_u + 10**15)
    r = nfs_rates(dataclasses.replace(cur, xprt=xprt), prev, 10.0)
    assert all_rates_none(r) and "backlog" in r.dropped


def test_a_counter_that_went_down_is_said():
    prev, cur = pair()
    xprt = dataclasses.replace(cur.xprt, sends=prev.xprt.sends - 1)
    r = nfs_rates(dataclasses.replace(cur, xprt=xprt), prev, 10.0)
    assert r.ops_s is None and r.read_ops_s == 10.0       # only what uses it is n/a
    assert "xprt sends went down" in r.dropped


def test_mountstats_counters_beyond_64_bits_are_refused_at_the_edge():
    body = text("mountstats_nfsmountstats_mixed.next")
    assert "READ: 584 " in body                      # /mnt/nfs1/docs's READ line
    for token in ("9" * 30, "1" * 5000, str(U64)):
        # the READ line's first counter: a number no kernel prints
        parsed = nfsstats.parse(body.replace("READ: 584 ", f"READ: {token} "))
        assert "READ" not in parsed[MP].ops          # never raises, even at 5,000 digits
        assert parsed[MP].xprt is not None           # and the rest of the mount is read
        quick = nfsstats.quick_counters(body.replace("READ: 584 ", f"READ: {token} "), {MP})
        assert "read_ops" not in quick[MP]
    assert nfsstats._uint(str(U64 - 1)) == U64 - 1 and nfsstats._uint(str(U64)) is None


def test_recorded_counters_that_no_kernel_could_print_are_left_out():
    prev, cur = pair()
    before = nfsstats.mount_counters(prev)
    after = dict(nfsstats.mount_counters(cur), read_ops=10**40, xprt_sends=-5,
                 read_bytes_recv="lots")
    views = mount_views({MP: MountRaw(MP, cur.fstype, cur.source, "nfs", counters=after)},
                        {MP: MountRaw(MP, prev.fstype, prev.source, "nfs", counters=before)},
                        {}, 10.0)
    v = views[MP]
    assert v.read_ops_s is None and v.read_kb_s is None and v.backlog is None


def test_lustre_rates_beyond_any_device_are_dropped_and_clears_are_said():
    prev = lustre_file("llite_2.14_read_latency_stats")
    cur = lustre_file("llite_2.14_read_latency_stats.next")
    assert lustre_rates(cur, prev, interval_s=1.0).dropped is None
    rb = cur.counters["read_bytes"]
    huge = rb._replace(sum=rb.sum + 10**19)
    r = lustre_rates(dataclasses.replace(cur, counters={**cur.counters, "read_bytes": huge}),
                     prev, interval_s=1.0)
    assert all_rates_none(r) and "read kB/s" in r.dropped
    r = lustre_rates(prev, cur, interval_s=1.0)             # swapped: every counter down
    assert r.read_ops_s is None and "went down" in r.dropped
    assert lustre._int("9" * 25) is None and lustre._int("-" + "9" * 5000) is None
    recorded = lustre.from_counters("x", {"read_bytes/samples": 10**30, "read_bytes/sum": 5})
    assert "read_bytes" not in recorded.counters
    a = lustre.LustreStatsRaw("x", 1.0, {"read_bytes": LustreCounter(5, "bytes", 1, 1, 5)})
    assert lustre_rates(a, a, interval_s=1.0).read_ops_s == 0.0


def test_fuse_waiting_is_an_int_the_kernel_could_count_or_nothing():
    def view(waiting):
        raw = MountRaw("/f", "fuse.x", "x", "fuse", counters={"waiting": waiting})
        return mount_views({"/f": raw}, None, {}, 1.0)["/f"]
    assert view(3).waiting == 3 and view(3).dropped is None
    for bad in (-1, 2**31, 10**40, 1.5, "7"):
        v = view(bad)
        assert v.waiting is None and "cannot be" in v.dropped
