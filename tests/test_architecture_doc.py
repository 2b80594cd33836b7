"""docs/architecture.md against the package: its layer table is tests/test_layering.py's
LAYERS, every folder of gpudisk_top/ has its place in "Where things live", every path it
names there exists, and the two wings that grew beside the frame (the fleet, device
health) are drawn module by module.  Every module path it names anywhere is in the tree
(a row of "Where things live" may name its own folder's modules from that folder), the
recording index and format 2's codec modules are named where they are, and the codec's
import rule is said as the code has it (stated true exactly when record/v2/ imports
nothing of record/ above it)."""

from __future__ import annotations

import re
from pathlib import Path

from test_layering import LAYERS, PACKAGE, import_graph

DOC = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    start = DOC.index(f"\n{title}\n")
    end = DOC.find("\n#", start + len(title) + 2)
    return DOC[start:end if end >= 0 else None]


def _rows(section: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in section.splitlines() if line.startswith("| ") and "---" not in line]


def _names(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def _folders() -> list[str]:
    """Every folder of the package that holds Python, relative to it ('verdict/detect')."""
    return sorted({p.parent.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")
                   if p.parent != PACKAGE})


def test_the_layer_table_is_the_one_test_layering_enforces():
    doc = {}
    for layer, parts in _rows(_section("### Layers"))[1:]:
        for name in _names(parts):
            doc[name.rstrip("/").removesuffix(".py")] = int(layer)
    expected = {part: i for i, parts in enumerate(LAYERS) for part in parts
                if part != "(package)"}
    # the package's own small modules at layer 0 are named one by one in the doc
    assert {p: doc.get(p) for p in expected} == expected


def test_every_folder_has_its_place_and_every_named_path_exists():
    rows = _rows(_section("## Where things live"))[1:]
    where = {name: row[1] for row in rows for name in _names(row[0])}
    for name in where:
        path = PACKAGE / name.rstrip("/")
        assert path.exists(), f"docs/architecture.md names {name}, which is not in the package"
    for folder in _folders():
        parent, _, leaf = folder.rpartition("/")
        listed = (f"{folder}/" in where or any(n.startswith(f"{folder}/") for n in where)
                  or (parent and f"`{leaf}/`" in where.get(f"{parent}/", ""))
                  or (parent and f"`{folder}/`" in where.get(f"{parent}/", "")))
        assert listed, f"{folder}/ has no place in docs/architecture.md's 'Where things live'"


def test_the_fleet_and_device_health_wings_are_drawn_module_by_module():
    wings = _section("### Two wings on the same frame")
    fleet = sorted(p.name for p in (PACKAGE / "fleet").glob("*.py") if p.name != "__init__.py")
    assert fleet and all(f"fleet/{name}" in wings for name in fleet), fleet
    health = sorted(p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("health.py"))
    assert len(health) >= 4 and all(f"`{path}`" in wings for path in health), health
    for ui in sorted(Path(PACKAGE / "ui").rglob("fleet*.py")):
        rel = ui.relative_to(PACKAGE).as_posix()
        assert rel in wings or f"{ui.parent.relative_to(PACKAGE).as_posix()}/fleet_*.py" in wings, rel


def _resolves(name: str, folder: str = "") -> bool:
    """name is a file of the package (from its root or from `folder`, a bare name anywhere
    below `folder`) or of the repository."""
    if any(p.exists() for p in (PACKAGE / name, PACKAGE / folder / name, PACKAGE.parent / name)):
        return True
    return folder != "" and "/" not in name and any((PACKAGE / folder).rglob(name))


def test_every_module_path_named_is_in_the_tree():
    rows = _rows(_section("## Where things live"))[1:]
    for row in rows:
        first = (_names(row[0]) or [""])[0]
        folder = first if first.endswith("/") else first.rpartition("/")[0]
        for name in _names(row[1]):
            if name.endswith(".py") and "*" not in name:
                assert _resolves(name, folder), f"docs/architecture.md's {row[0]} row names {name}"
    # a path elsewhere may start below the package's top ('widgets/base.py' in ui/)
    files = [p.as_posix() for p in PACKAGE.rglob("*.py")]
    for name in set(re.findall(r"`([^`\s*]+/[^`\s*]+\.py)`", DOC)):
        assert _resolves(name) or any(f.endswith(f"/{name}") for f in files), \
            f"docs/architecture.md names {name}, which is not in the tree"


def test_the_recording_index_and_the_codec_modules_are_named_where_they_are():
    """The record/ row names format 2's codec modules in record/v2/ (every one of them) and
    the index by its path: 'record/v2/index.py' once stood there for record/index_v2.py."""
    row = next(r[1] for r in _rows(_section("## Where things live")) if r[0] == "`record/`")
    codec = row[row.index("`record/v2/`"):]
    named = {n for n in _names(codec) if n.endswith(".py") and "/" not in n}
    v2 = {p.name for p in (PACKAGE / "record" / "v2").glob("*.py") if p.name != "__init__.py"}
    assert named == v2, f"record/v2/ holds {sorted(v2)}; the doc names {sorted(named)}"
    indexes = sorted(p.relative_to(PACKAGE).as_posix()
                     for p in (PACKAGE / "record").rglob("*index*.py"))
    assert indexes and all(f"`{path}`" in row for path in indexes), indexes


def test_the_codec_rule_is_said_as_the_code_has_it():
    """The Layers section says record/v2/ never imports up into record/, and says it is
    not yet true exactly when some module of record/v2/ does (test_layering's rule)."""
    graph = import_graph()
    upward = sorted(f"{m} imports {t}" for m in graph if m.startswith("gpudisk_top.record.v2")
                    for t in graph[m] if t.startswith("gpudisk_top.record")
                    and not t.startswith("gpudisk_top.record.v2"))
    layers = " ".join(_section("### Layers").split())
    rule = layers[layers.index("Inside `record/`"):layers.index("| layer |")]
    assert "never imports up into `record/`" in rule, rule
    assert ("not yet" in rule) == bool(upward), (rule, upward)
    for name in _names(rule):
        assert not name.endswith(".py") or _resolves(name), name
