"""The session header: who recorded what, written once per session as an H frame (JSON)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import platform

from gpudisk_top import __version__
from gpudisk_top.collect.sample import Sample
from gpudisk_top.collect.source import LIVE, Source, live_source
from gpudisk_top.record import v2

FORMAT_NAME = "gpudisk-top recording"
FORMAT_VERSION = 3        # the version this code writes; reader.py reads every version up to it
# 3 (issue 41): blocks may code a column against others (record/v2/predict.py), summaries
# are LZMA-compressed; rows, frames and everything else as in 2.  A version 2 file is
# appended to as version 2 (its blocks without predictions, its summaries deflated), so
# that an older gpudisk-top still reads it whole.
OLDEST_APPENDED = 2
SEGMENT_SAMPLES = 600     # samples per block: the longest decode for a seek


def iso(wall_s: float) -> str:
    return dt.datetime.fromtimestamp(wall_s).astimezone().isoformat(timespec="milliseconds")


def make_header(origin: Source | None = None, interval_s: float | None = None, **extra) -> dict:
    """The caller's part of a session header: where the samples come from (a Source, by
    default this machine: commands.common.open_source() gives it) and the interval; the
    recorder adds the rest from the first sample."""
    origin = origin or live_source()
    header = {
        "source": origin.label,
        "simulated": origin.kind != LIVE,
        "host_name": origin.host_name,
        "kernel": origin.kernel,
        "interval_s": interval_s,
    }
    header.update(extra)
    return header


def complete_header(header: dict, first: Sample) -> dict:
    """The H frame's JSON: the caller's header, the format's own fields, and the GPUs and
    devices as the first sample saw them."""
    out = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "tool": "gpudisk-top",
        "tool_version": __version__,
        "source": "live",
        "simulated": False,
        "host_name": platform.node(),
        "kernel": platform.release(),
        "interval_s": None,
    }
    out.update(header)
    out.update({
        "started": iso(first.wall_s),
        "started_s": first.wall_s,
        "recorder_pid": os.getpid(),
        "ncpu": first.host.ncpu,
        "gpu_status": first.gpu.status,
        "driver_version": first.gpu.driver_version,
        "gpus": [{"index": g.index, "name": g.name, "uuid": g.uuid, "pci_bus_id": g.pci_bus_id,
                  "mem_total_mib": None if g.mem_total_bytes is None else g.mem_total_bytes / 2**20}
                 for g in first.gpu.gpus],
        "devices": [{k: (list(v) if isinstance(v, tuple) else v)
                     for k, v in dataclasses.asdict(d).items()} for d in first.devices.values()],
        "segment_samples": header.get("segment_samples", SEGMENT_SAMPLES),
        "compression": "rows: JSON; blocks: columns, LZMA2 (raw) per block",
        "schema": v2.schema(),
    })
    return out
