"""The words for a network or FUSE mount the job waits on: its evidence and the advice
that fits its kind (the detector's `disk-starved` kind `remote-mount`)."""

from __future__ import annotations

from gpudisk_top.model.mounts import MountView
from gpudisk_top.model.present import pct
from gpudisk_top.model.vocab import mb_s


def mount_evidence(m: MountView) -> str:
    """'READ 2300 ops/s, 18.0 MB/s, RTT 4.1 ms, exec 4.6 ms, 12 retransmissions/s'
    (NFS); 'read 40 MB/s, 3.2 ms a read' (Lustre); '8 requests waiting on its daemon
    pid 912 (s3fs, 35% CPU, reading 20 MB/s)' (FUSE)."""
    parts = []
    if m.kind == "fuse":
        if m.waiting is not None:
            parts.append(f"{m.waiting} request{'s' * (m.waiting != 1)} waiting on its daemon")
        if m.daemon_pid is not None:
            cpu = f"{pct(m.daemon_cpu_pct)} CPU" if m.daemon_cpu_pct is not None else "CPU n/a"
            traffic = (f", reading {mb_s(m.daemon_rchar_kb_s):.1f} MB/s"
                       if m.daemon_rchar_kb_s is not None else "")
            parts.append(f"daemon pid {m.daemon_pid} ({cpu}{traffic})")
        else:
            parts.append("its daemon not found (none or several hold /dev/fuse for it)")
    else:
        if m.read_ops_s is not None:
            parts.append(f"READ {m.read_ops_s:.0f} ops/s" if m.kind == "nfs"
                         else f"{m.read_ops_s:.0f} reads/s")
        if m.read_kb_s is not None:
            parts.append(f"{mb_s(m.read_kb_s):.1f} MB/s")
        if m.rtt_ms is not None:
            parts.append(f"RTT {m.rtt_ms:.1f} ms")
        if m.exec_ms is not None:
            parts.append(f"{'exec' if m.kind == 'nfs' else 'latency'} {m.exec_ms:.1f} ms")
        if m.retrans_s:
            parts.append(f"{m.retrans_s:.0f} retransmissions/s")
        if m.backlog:
            parts.append(f"backlog {m.backlog:.1f}")
    return ", ".join(parts) or "no statistics of its own"


def mount_advice(m: MountView) -> str:
    common = ("stage the dataset on local NVMe or tmpfs (or a local cache in front of the "
              "mount); larger files or a packed format (WebDataset, LMDB, TFRecord) for "
              "fewer, larger reads; more DataLoader workers to keep more reads in flight")
    if m.kind == "nfs":
        return (common + "; for NFS: nconnect=8 and rsize=1048576 mount options, and "
                "check the server and network for the RTT")
    if m.kind == "fuse":
        return (common + "; for a FUSE object store: its cache (file cache, prefetch, "
                "parallel downloads) and a region close to the bucket")
    if m.kind == "lustre":
        return common + "; for Lustre: striping of the dataset's files (lfs setstripe)"
    return common
