"""The words for a mount the job waits on (verdict/detect/remote.py), by the mount's kind:
the numbers its own statistics give, and the advice that fits that kind."""

from __future__ import annotations

from gpudisk_top.verdict.detect.remote import mount_advice, mount_evidence
from gpudisk_top.model.mounts import MountView


def _mount(kind: str, **kw) -> MountView:
    fstype = {"nfs": "nfs4", "fuse": "fuse.s3fs"}.get(kind, kind)
    return MountView(mountpoint="/data", fstype=fstype, source="10.0.0.5:/ds", kind=kind, **kw)


def test_nfs_evidence_gives_reads_rtt_exec_and_retransmissions():
    m = _mount("nfs", read_ops_s=2300.4, read_kb_s=18 * 1024, rtt_ms=4.06, exec_ms=4.61,
               retrans_s=12.2)
    assert mount_evidence(m) == ("READ 2300 ops/s, 18.0 MB/s, RTT 4.1 ms, exec 4.6 ms, "
                                 "12 retransmissions/s")
    assert "nconnect=8" in mount_advice(m) and "Lustre" not in mount_advice(m)


def test_lustre_evidence_says_latency_and_its_advice_striping():
    m = _mount("lustre", read_ops_s=50.0, read_kb_s=40 * 1024, exec_ms=3.2)
    assert mount_evidence(m) == "50 reads/s, 40.0 MB/s, latency 3.2 ms"
    assert "lfs setstripe" in mount_advice(m)


def test_fuse_evidence_names_its_daemon_or_says_it_was_not_found():
    m = _mount("fuse", waiting=8, daemon_pid=912, daemon_cpu_pct=35.2, daemon_rchar_kb_s=20 * 1024)
    assert mount_evidence(m) == ("8 requests waiting on its daemon, "
                                 "daemon pid 912 (35% CPU, reading 20.0 MB/s)")
    alone = _mount("fuse", waiting=1)
    assert mount_evidence(alone) == ("1 request waiting on its daemon, its daemon not found "
                                     "(none or several hold /dev/fuse for it)")
    assert "object store" in mount_advice(m)


def test_a_mount_without_statistics_says_so_and_gets_the_common_advice():
    m = _mount("network")
    assert mount_evidence(m) == "no statistics of its own"
    assert mount_advice(m).startswith("stage the dataset on local NVMe")
    assert "NFS" not in mount_advice(m) and "FUSE" not in mount_advice(m)
