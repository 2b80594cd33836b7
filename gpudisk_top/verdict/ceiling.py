"""Whether a device's stored probe may be believed: the one owner of that rule.

`gpudisk-top probe` measured a device once (probe/store.py keeps it; the sampler gives it
to the device as DeviceInfo.ceiling_iops, ceiling_mib_s and probed_read_ms).  The file
may be old, hand-edited, damaged by a flipped digit, or of another disk put in this one's
place under a weak identity; the device's own counters are measured now.  A probe is not
used, as a whole, where:

  - a figure is no device's: a 4 KiB random-read rate under FLOOR_IOPS, a sequential one
    under FLOOR_MIB_S (a USB 2 hard disk does ~70 r/s and 30 MiB/s), or one above what any
    device does (model/disk.py MAX_OPS_S, MAX_DATA_BYTES_S);
  - its figures contradict each other: the QD1 rate above MARGIN x the QD32 ceiling (a
    deeper queue never halves a device's rate);
  - the device contradicts it: it read more than MARGIN x its QD32 ceiling in reads a
    second, or MARGIN x its sequential MiB/s, in this interval or an earlier one of the
    same run (the caller keeps the highest).  MARGIN, not 1: a queue deeper than 32, or
    reads the device serves from its own cache, can outrun the probe a little.

Then the saturation judgement, the verdict's evidence and the what-if go on as if the
device had never been probed, and say why (`doubt`'s line).  Never raises.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from gpudisk_top.model.disk import MAX_DATA_BYTES_S, MAX_OPS_S
from gpudisk_top.model.present import pct

MARGIN = 2.0            # what the device may do beyond its stored ceiling before it is doubted
FLOOR_IOPS = 10.0       # r/s: under this a stored 4 KiB random-read figure is no device's
FLOOR_MIB_S = 1.0       # MiB/s: the same for its sequential reads
MAX_MIB_S = MAX_DATA_BYTES_S / 2**20


class Vetted(NamedTuple):
    """A device's probe figures as the model may use them: all None, with `doubt` saying
    why, where the probe is not believed."""

    ceiling_iops: float | None = None
    ceiling_mib_s: float | None = None
    probed_read_ms: float | None = None
    doubt: str | None = None


_UNPROBED = Vetted()


def _rate(value: float) -> str:
    """10.2k, 250, 0.001: a rate as the line says it."""
    if value >= 1e4:
        return f"{value / 1000:.1f}k" if value < 1e7 else f"{value:.3g}"
    return f"{value:.0f}" if value >= 100 else f"{value:.3g}"


def _out_of_range(what: str, value: float, floor: float, top: float, unit: str) -> str | None:
    if not math.isfinite(value):
        return f"its stored {what} ({value}) is not a rate"
    if value < floor:
        return (f"its stored {what} of {_rate(value)} {unit} is below any disk's "
                f"({floor:g} {unit})")
    if value > top:
        return (f"its stored {what} of {_rate(value)} {unit} is above any device's "
                f"({top:.0e} {unit})")
    return None


def doubt(name: str, ceiling_iops: float | None, ceiling_mib_s: float | None,
          probed_read_ms: float | None, read_r_s: float, read_kb_s: float) -> str | None:
    """Why the probe of `name` is not to be believed ("probe of vda ignored: 10.2k r/s
    read, above twice its stored QD32 ceiling of 1 r/s"), or None.  read_r_s, read_kb_s:
    the most the device has read, per second, in an interval so far (now included)."""
    qd1_iops = None if probed_read_ms is None else (
        1000.0 / probed_read_ms if probed_read_ms > 0 else math.nan)
    # the device's own evidence first: it says what the device does, not only that the
    # figure is odd
    why, read_mib_s = None, read_kb_s / 1024
    if ceiling_iops and read_r_s > MARGIN * ceiling_iops:
        why = (f"{_rate(read_r_s)} r/s read, above twice its stored QD32 ceiling of "
               f"{_rate(ceiling_iops)} r/s")
    elif ceiling_mib_s and read_mib_s > MARGIN * ceiling_mib_s:
        why = (f"{_rate(read_mib_s)} MiB/s read, above twice its stored sequential ceiling "
               f"of {_rate(ceiling_mib_s)} MiB/s")
    for what, value, floor, top, unit in (
            ("QD32 ceiling", ceiling_iops, FLOOR_IOPS, MAX_OPS_S, "r/s"),
            ("QD1 rate", qd1_iops, FLOOR_IOPS, MAX_OPS_S, "r/s"),
            ("sequential ceiling", ceiling_mib_s, FLOOR_MIB_S, MAX_MIB_S, "MiB/s")):
        if value is not None:
            why = why or _out_of_range(what, value, floor, top, unit)
    if why is None and ceiling_iops and qd1_iops and qd1_iops > MARGIN * ceiling_iops:
        why = (f"its stored QD1 rate of {_rate(qd1_iops)} r/s is above twice its QD32 "
               f"ceiling of {_rate(ceiling_iops)} r/s")
    return f"probe of {name} ignored: {why}" if why else None


def vet(name: str, ceiling_iops: float | None, ceiling_mib_s: float | None,
        probed_read_ms: float | None, read_r_s: float, read_kb_s: float) -> Vetted:
    """The probe's figures where they may be believed (doubt() is None), else none of
    them and the reason."""
    if ceiling_iops is None and ceiling_mib_s is None and probed_read_ms is None:
        return _UNPROBED     # most devices, every interval: nothing to hold to the rates
    why = doubt(name, ceiling_iops, ceiling_mib_s, probed_read_ms, read_r_s, read_kb_s)
    if why is not None:
        return Vetted(doubt=why)
    return Vetted(ceiling_iops, ceiling_mib_s, probed_read_ms)


def probe_figures(s) -> tuple[float | None, float | None, float | None, str | None]:
    """(QD32 r/s, QD1 r/s, sequential MiB/s, doubt) of a device's probe as its vetted
    Saturation `s` (model.detect) holds it: the what-if's device stage."""
    qd1_iops = 1000.0 / s.probed_read_ms if s.probed_read_ms else None
    return s.ceiling_iops, qd1_iops, s.ceiling_mib_s, s.probe_doubt


def headroom(s) -> str:
    """What the verdict's evidence says of a device's ceiling beside its reads a second
    (`s`: a model.detect Saturation, vetted): " of its 98120 at queue depth 32 (probe):
    31% of its ceiling", else the highest rate seen where it is above now, and why a
    stored probe was not used."""
    if s.ceiling_iops:
        return (f" of its {s.ceiling_iops:.0f} at queue depth 32 (probe): "
                f"{pct(s.iops / s.ceiling_iops * 100)} of its ceiling")
    peak = f" (peak seen {s.peak_iops:.0f})" if s.peak_iops > s.iops * 1.1 else ""
    return peak + (f" ({s.probe_doubt})" if s.probe_doubt else "")
