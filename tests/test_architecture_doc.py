"""docs/architecture.md against the package: its layer table is tests/test_layering.py's
LAYERS, every folder of gpudisk_top/ has its place in "Where things live", every path it
names there exists, and the two wings that grew beside the frame (the fleet, device
health) are drawn module by module."""

from __future__ import annotations

import re
from pathlib import Path

from test_layering import LAYERS, PACKAGE

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
