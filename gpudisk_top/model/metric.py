"""What a metric is: the Metric and Family types the vocabulary (model/vocab.py) writes
every name in, the model's units and what each is in Prometheus's base units.

Units are binary, as iostat's are: its kB is a KiB (KIB, 1024 bytes) and its MB a MiB
(MIB, 2^20 bytes), so a size or rate read here is never a power of ten
(docs/json-output.md#units).

A Metric says, for one number:

  field       the attribute of the model's view; units in the name (_ms, _kb_s, _pct)
  unit        the model's unit: "ms", "kB/s", "%", "/s", ...
  label       the short header a person reads (iostat's own where iostat has one)
  help        what it means; also the HELP line of its Prometheus family
  prom        its Prometheus family, without the gpudisk_top_ prefix, in base units
              (seconds, bytes, ratios 0-1, ...); None: not exported
  prom_label  (label, value) for a family with one series per metric (host_cpu_ratio
              {mode="user"}); the family's HELP is then PROM_FAMILY_HELP's
  json_key    its key in JSON output: the field, unless said otherwise
  csv, alert  whether `export --format csv` has a column for it and alert rules may test it
  counter     a Prometheus counter (a count the device only adds to: its family is
              exported with `_total`), else a gauge
  decimals    how it reads on every surface (Metric.text): the dashboard's panels, the
              verdict's evidence, `--once`, `report`, the fleet.  iostat -x prints every
              column with 2 decimals (r_await 12.34, aqu-sz 0.39, %util 32.10) and people
              who read disks read them so: 2 is the default; counts and whole units
              (MiB, W, C, SMART counters) 0
  width       the least width of its column in a text table (iostat's 7; wider where its
              label is: Metric.column_width)
"""

from __future__ import annotations

from dataclasses import dataclass

KIB = 1024
MIB = 2**20
GIB = 2**30
TIB = 2**40

# The model's units that are not Prometheus's base units: what one of them is in base
# units (iostat's kB is 1024 bytes).  Every other unit is exported as it is.
BASE_FACTOR = {"%": 0.01, "ms": 0.001, "kB": KIB, "kB/s": KIB, "MiB": MIB, "MB/s": MIB,
               "MHz": 1e6, "min": 60, "h": 3600}
# Every Prometheus family's name begins so (Metric.prom_name)
PROM_PREFIX = "gpudisk_top_"

# Families with one series per metric, told apart by a label: their HELP line.
PROM_FAMILY_HELP = {
    "host_cpu_ratio": "Share of CPU time per mode over the interval, as iostat's avg-cpu "
                      "(system includes irq and softirq).",
    "host_pressure_some_ratio": "Share of the interval in which some task stalled on the "
                                "resource (PSI some).",
    "host_pressure_full_ratio": "Share of the interval in which all non-idle tasks stalled "
                                "on the resource (PSI full).",
    "gpu_clock_throttle_ratio": "Share of the interval the GPU's clocks were held down for "
                                "the reason (NVML clock-event durations).",
    "job_cgroup_pressure_some_ratio": "Share of the interval in which some task of the job's "
                                      "cgroup stalled on the resource (its PSI some).",
    "job_cgroup_pressure_full_ratio": "Share of the interval in which all non-idle tasks of "
                                      "the job's cgroup stalled on the resource (its PSI "
                                      "full).",
}


@dataclass(frozen=True)
class Metric:
    """One number of the model and every name it goes by (see the module's docstring)."""

    field: str
    unit: str
    label: str
    help: str
    prom: str | None = None
    prom_label: tuple[str, str] | None = None
    json_key: str = ""
    csv: bool = True
    alert: bool = True
    counter: bool = False
    decimals: int = 2
    width: int = 7

    def __post_init__(self) -> None:
        if not self.json_key:
            object.__setattr__(self, "json_key", self.field)

    def text(self, value: float | None, na: str = "n/a", width: int | None = None) -> str:
        """The value as every surface prints it: `decimals` places, `na` for None.  In a
        column `width` cells wide (a narrow panel, a timeline's legend) decimals go first,
        then thousands become k, M, G: the same figure, rounded, never cut."""
        if value is None:
            return na
        for places in range(self.decimals, -1, -1):
            text = f"{value:.{places}f}"
            if width is None or len(text) <= width:
                return text
        for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
            if abs(value) >= div and len(f"{value / div:.0f}{suffix}") <= width:
                short = f"{value / div:.1f}{suffix}"
                return short if len(short) <= width else f"{value / div:.0f}{suffix}"
        return text

    @property
    def column_width(self) -> int:
        """Its column's width in a text table: `width`, or its label's where longer."""
        return max(self.width, len(self.label))

    @property
    def prom_factor(self) -> float:
        """What one of the model's units is in Prometheus's base unit."""
        return BASE_FACTOR.get(self.unit, 1)

    @property
    def prom_name(self) -> str | None:
        """Its Prometheus family's full name (None: not exported), as the exporter writes
        it and the fleet reads it back."""
        return None if self.prom is None else PROM_PREFIX + self.prom

    def from_base(self, value: float) -> float:
        """A value of its Prometheus family (base units) in the model's unit: what the
        fleet does to what it reads back.  Times the reciprocal (1/0.01 is exactly
        100): x * 100 and x / 0.01 differ in the last bit, and JSON shows that bit."""
        return value * (1.0 / self.prom_factor)

    @property
    def prom_help(self) -> str:
        """The HELP line of its Prometheus family."""
        return PROM_FAMILY_HELP.get(self.prom, self.help)


@dataclass(frozen=True)
class Family:
    """The metrics of one kind of subject (a disk, a GPU, the host), in a fixed order:
    the order of CSV columns and Prometheus families."""

    kind: str
    metrics: tuple[Metric, ...]

    def __iter__(self):
        return iter(self.metrics)

    def __getitem__(self, name: str) -> Metric:
        """The metric of that field.  Raises KeyError for a field it does not have."""
        for m in self.metrics:
            if m.field == name:
                return m
        raise KeyError(name)

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(m.field for m in self.metrics)

    def qualified(self, metric: Metric) -> str:
        """The name CSV columns and alert rules give it: '<kind>_<field>'."""
        return f"{self.kind}_{metric.field}"
