"""How every surface names a GPU's busy tier (model/gpu.py chooses it): the tag a figure
carries ("SM" for GPM SM activity, "util" for utilization.gpu), the tier's name in
words, and when utilization.gpu and SM activity read so far apart that both are shown
("SM 3% (util 100%)": a one-thread kernel keeps utilization.gpu at 100%).  The dashboard,
the report and the fleet read it here, so that they name a tier alike.
"""

from __future__ import annotations

from gpudisk_top.model.gpu import BUSY_GPM, BUSY_UTILIZATION

# the tags of the tiers; a tier this version does not know (a newer exporter's, a damaged
# recording's) reads as utilization, the figure every GPU has
TAG = {BUSY_GPM: "SM", BUSY_UTILIZATION: "util"}
NAME = {BUSY_GPM: "GPM SM activity", BUSY_UTILIZATION: "utilization.gpu"}
TAG_W = max(map(len, TAG.values()))
# the exporter's info-style series of each GPU's tier (exporter/families.py writes it, the
# fleet reads it: fleet/queries.py), without the gpudisk_top_ prefix; its label `source`
# is the tier (GpuView.busy_source)
PROM_BUSY_SOURCE = "gpu_busy_source_info"
PROM_BUSY_SOURCE_HELP = ("Always 1; source: which figure gpudisk_top_gpu_utilization_ratio is "
                         "for the GPU this interval: gpm-sm-active (GPM SM activity, Hopper "
                         "and later) or utilization (NVML utilization.gpu).")
# points between utilization.gpu and SM activity from which both are shown: the two
# agree within a few points on a dense matmul, and differ by tens on small kernels
APART_PT = 25.0


def known(source: str | None) -> str:
    """`source` where it is a tier this version knows, else BUSY_UTILIZATION.  Raises
    nothing."""
    return source if source in TAG else BUSY_UTILIZATION


def tag(source: str | None) -> str:
    """The tag of a tier ("SM", "util")."""
    return TAG[known(source)]


def name(source: str | None) -> str:
    """A tier in words ("GPM SM activity", "utilization.gpu")."""
    return NAME[known(source)]


def apart(view) -> bool:
    """Whether a GpuView's SM activity (its busy figure) and utilization.gpu read
    APART_PT or more apart, so that a surface shows both."""
    return (view.busy_source == BUSY_GPM and view.util_pct is not None
            and view.gpu_util_pct is not None
            and abs(view.gpu_util_pct - view.util_pct) >= APART_PT)


def busy_text(view) -> str:
    """A GpuView's busy figure with its tier, in whole percent: "SM 34%", "util 34%",
    "SM 3% (util 100%)" where the two are apart, "util n/a"."""
    pct = "n/a" if view.util_pct is None else f"{view.util_pct:.0f}%"
    text = f"{tag(view.busy_source)} {pct}"
    if apart(view):
        text += f" (util {view.gpu_util_pct:.0f}%)"
    return text
