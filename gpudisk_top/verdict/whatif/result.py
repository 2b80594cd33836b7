"""A what-if prediction (`WhatIf`) and its one text and JSON form: the JSON contract
`verdict.whatif` (as_json / from_json, of_json), the line every surface prints (line,
best_line, text_lines).  Its cap is two things side by side: `limit`, the key code asks
(verdict/whatif/limit.py), and `cap`, the sentence people read; JSON and recordings keep
the sentence alone, so a prediction read back from them has no key."""

from __future__ import annotations

from dataclasses import InitVar, dataclass, field

from gpudisk_top.verdict.whatif.fixes import FIX
from gpudisk_top.verdict.whatif.limit import Limit

MEASURED = "measured"
ESTIMATED = "estimated"


@dataclass
class WhatIf:
    """One fix's prediction (the JSON contract `verdict.whatif`, best first)."""

    fix: str
    speedup: float
    gpu_util_pct: float
    gpu_now_pct: float
    confidence: str
    basis: str
    cap: str | None = None
    from_: int | None = None     # num_workers now and after, for the workers fixes: counts
    to: int | None = None
    pids: list[int] = field(default_factory=list)
    who: str | None = None       # the neighbour fix's: whose reads (Culprit.who(), joined)
    # where the device it waits on was not probed: "no probe of vda: gpudisk-top probe
    # /data", printed beside the gain (line): the figure is a floor, and this measures it
    unprobed: str | None = None
    # the binding limit's key, beside its sentence `cap` (None where none binds, or the
    # prediction was read back from JSON): not a field, so neither the JSON contract nor a
    # recording's episodes (dataclasses.asdict) change with it
    limit: InitVar[Limit | None] = None

    def __post_init__(self, limit: Limit | None) -> None:
        self.limit = limit

    @property
    def speedup_shown(self) -> float:
        """The gain as every surface gives it (JSON, recordings' reports): a rule that
        says more for a gain past a bound judges this figure, so that no reader sees
        1.05 where the rule saw 1.0497 and said nothing."""
        return round(self.speedup, 3)

    def as_json(self) -> dict:
        out = {"fix": self.fix, "from": self.from_, "to": self.to,
               "speedup": self.speedup_shown, "gpu_util_pct": round(self.gpu_util_pct, 1),
               "cap": self.cap, "confidence": self.confidence, "basis": self.basis,
               "gpu_now_pct": round(self.gpu_now_pct, 1)}
        if self.fix in ("others", "neighbour"):
            out["pids"] = list(self.pids)
        if self.who is not None:
            out["who"] = self.who
        if self.unprobed is not None:
            out["unprobed"] = self.unprobed
        return out

    @classmethod
    def from_json(cls, doc: dict) -> "WhatIf":
        """One prediction back from its as_json(); raises KeyError where a key it cannot
        do without is missing."""
        now = doc.get("gpu_now_pct")
        if now is None:
            now = doc["gpu_util_pct"] / doc["speedup"] if doc["speedup"] else 0.0
        return cls(fix=doc["fix"], speedup=doc["speedup"], gpu_util_pct=doc["gpu_util_pct"],
                   gpu_now_pct=now, confidence=doc["confidence"],
                   basis=doc["basis"], cap=doc.get("cap"), from_=doc.get("from"),
                   to=doc.get("to"), pids=list(doc.get("pids") or []),
                   who=doc.get("who") if isinstance(doc.get("who"), str) else None,
                   unprobed=doc.get("unprobed") if isinstance(doc.get("unprobed"), str)
                   else None)

    def title(self) -> str:
        """'num_workers 4 → 8', 'stop the processes that take the CPUs', 'stop or
        throttle pid 912 (fio)'s reads': its fix's title (verdict/whatif/fixes.py
        REGISTRY; who is text from the machine, the caller's to escape).  Raises KeyError
        for a fix no entry names."""
        return FIX[self.fix].title.format(from_=self.from_, to=self.to,
                                          who=self.who or "the neighbour")

    def line(self) -> str:
        """'num_workers 4 → 8: GPU ~2% → ~4% (×1.90), capped by the device: ...' (the
        cap's own text is the model's, never from the machine); an unprobed device's
        '(×1.40, estimated; no probe of vda: gpudisk-top probe /data)' (a mountpoint is
        text from the machine: the caller's to escape, as the basis)."""
        cap = f", {self.cap}" if self.cap else ""
        est = ", estimated" if self.confidence == ESTIMATED else ""
        if self.unprobed:
            est += f"; {self.unprobed}"
        return (f"{self.title()}: GPU ~{self.gpu_now_pct:.0f}% → ~{self.gpu_util_pct:.0f}% "
                f"(×{self.speedup:.2f}{est}){cap}")


def best_line(whatif: list[WhatIf]) -> str | None:
    """'best fix: num_workers 4 → 8: GPU ~2% → ~4% (×1.90), capped by the device: ...':
    the banner's, the report's and --once's one line (text from the machine in the basis
    is the caller's to escape, as the verdict's reason is)."""
    return f"best fix: {whatif[0].line()}" if whatif else None


def text_lines(whatif: list[WhatIf], prefix: str = "what-if: ") -> list[str]:
    """Every prediction, best first, each with its basis: --once text and the episode's
    evidence."""
    return [f"{prefix}{w.line()} [{w.basis}]" for w in whatif]


def of_json(docs) -> list[WhatIf]:
    """The predictions back from `verdict.whatif` / an episode's `whatif` (report)."""
    return [WhatIf.from_json(d) for d in docs or ()]
