"""A vocabulary Family's metrics as Prometheus families: one gauge (a counter for a
Metric.counter) per family name, filled from a view in Prometheus's base units.  The one
place the node's families (exporter/families.py) and each job's (exporter/jobseries.py)
turn a model's numbers into series.  A value the model has as None (n/a) is left out,
never exported as 0."""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from gpudisk_top.model.metric import PROM_PREFIX


def add(fam, labels, value, factor=1) -> None:
    """One series of `fam`, value times factor; none where value is None."""
    if value is not None:
        fam.add_metric(labels, float(value) * factor)


def gauges(family, labels: list[str]) -> dict[str, GaugeMetricFamily]:
    """A gauge (a counter for a Metric.counter) per Prometheus family of a vocabulary
    family's metrics, in its order, with `labels` (and a metric's own label, for a family
    with a series per metric)."""
    out: dict[str, GaugeMetricFamily | CounterMetricFamily] = {}
    for m in family:
        if m.prom is not None and m.prom not in out:
            own = [m.prom_label[0]] if m.prom_label else []
            kind = CounterMetricFamily if m.counter else GaugeMetricFamily
            out[m.prom] = kind(PROM_PREFIX + m.prom, m.prom_help, labels=labels + own)
    return out


def fill(fams: dict, family, labels: list[str], source) -> None:
    """Add each exported metric of `source` (a view: GpuView, DiskRates, HostView; or a
    mapping) in base units; n/a values are left out."""
    get = source.get if isinstance(source, Mapping) else (lambda name: getattr(source, name))
    for m in family:
        if m.prom is not None:
            own = [m.prom_label[1]] if m.prom_label else []
            add(fams[m.prom], labels + own, get(m.field), m.prom_factor)
