"""The labelled scenario corpus for the starvation detector.

Every phase of every scenario carries the state a detector should report for it (one of
gpudisk_top.sim.LABELS).  The corpus is the built-in scenarios except `demo` (which
repeats them) plus every TOML file in this folder; README.md here lists them all.

    from corpus.corpus import scenarios     # with tests/ on sys.path, as pytest runs tests
    for name, scenario in scenarios():
        sim = Simulator(scenario, seed=0)
        expected = sim.labels()                        # one label per interval, one pass

No __init__.py: this folder holds data and one helper, not a package of tests.
"""

from __future__ import annotations

import re
from pathlib import Path

from gpudisk_top.sim import BUILTIN_NAMES, Scenario, builtin, load_toml

CORPUS_DIR = Path(__file__).resolve().parent
README = CORPUS_DIR / "README.md"
EXCLUDED_BUILTINS = ("demo",)   # the demo replays the other built-ins' cases, at 5 % noise


def scenarios() -> list[tuple[str, Scenario]]:
    """(name, fresh Scenario) of every corpus scenario, sorted by name.  Raises
    ScenarioError (a corpus file that does not load) or ValueError (a name used twice)."""
    found = [(name, builtin(name)) for name in BUILTIN_NAMES if name not in EXCLUDED_BUILTINS]
    found += [(sc.name, sc) for sc in (load_toml(str(p)) for p in sorted(CORPUS_DIR.glob("*.toml")))]
    names = [name for name, _ in found]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"corpus scenario name(s) used twice: {', '.join(dupes)}")
    return sorted(found, key=lambda item: item[0])


REAL_DIR = CORPUS_DIR.parent / "fixtures" / "real"


def real_recordings() -> list[tuple[str, str, dict]]:
    """(name, recording path, labels object) of every real recording (record_real.py),
    sorted by name."""
    import json

    out = []
    for labels in sorted(REAL_DIR.glob("*.labels.json")):
        name = labels.name[:-len(".labels.json")]
        rec = REAL_DIR / f"{name}.gdtrec"
        if rec.exists():
            out.append((name, str(rec), json.loads(labels.read_text(encoding="utf-8"))))
    return out


def readme_labels() -> dict[str, set[str]]:
    """{scenario name: the labels its README.md row lists}.  Rows are
    `| name | what happens | label, label |`; the header and rule rows are skipped."""
    rows: dict[str, set[str]] = {}
    for line in README.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if len(cells) != 3 or cells[0] in ("name", "") or set(cells[0]) <= set("-: "):
            continue
        name = cells[0].strip("`")
        rows[name] = {label.strip("` ") for label in re.split(r",", cells[2]) if label.strip()}
    return rows
