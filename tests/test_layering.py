"""One direction for data (STYLE.md): the collection and model layers never import
Textual, no module imports a layer above its own, and no imports go round in a circle;
nothing below commands/ reads the command line, and record/v2/ never imports up into
record/."""

from __future__ import annotations

import ast
import functools
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import gpudisk_top

HEADLESS_PACKAGES = ("gpudisk_top.collect", "gpudisk_top.model", "gpudisk_top.verdict", "gpudisk_top.sim",
                     "gpudisk_top.output", "gpudisk_top.fleet")


def headless_modules() -> list[str]:
    names = ["gpudisk_top.diskstats", "gpudisk_top.cli"]
    for info in pkgutil.walk_packages(gpudisk_top.__path__, "gpudisk_top."):
        if info.name.startswith(HEADLESS_PACKAGES):
            names.append(info.name)
    return names


def test_headless_layers_do_not_import_textual():
    modules = headless_modules()
    assert "gpudisk_top.collect.diskstats" in modules and "gpudisk_top.model.disk" in modules
    code = ("import importlib, sys\n"
            f"for m in {modules!r}: importlib.import_module(m)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'textual'))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


# ---------------------------------------------------------------------------- import direction
# Each top-level part of the package, by layer: a module may import its own layer and the
# layers below it, never one above (docs/architecture.md draws the same house).  Lazy
# imports inside functions count too: they are still a dependency.
LAYERS = (
    ("errors", "textsafe", "configlines", "deadline", "outfile", "ratelimit", "timeparse", "tomlread", "(package)"),
    ("collect",),
    ("model", "probe"),
    ("verdict", "sim", "fleet"),
    ("record", "diskstats"),
    ("session", "output", "watch", "alerts"),
    ("report", "exporter"),
    ("config",),
    ("ui",),
    ("commands",),
    ("cli", "__main__"),
)
PACKAGE = Path(gpudisk_top.__file__).parent


def module_files() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


@functools.cache
def tree_of(path: Path) -> ast.Module:
    """The file's syntax tree, parsed once a run: four checks walk the whole package."""
    return ast.parse(path.read_text(encoding="utf-8"))


def imports_of(name: str, path: Path, modules) -> set[str]:
    """The gpudisk_top modules `name` imports, anywhere in its code."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(tree_of(path)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("gpudisk_top"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([node.module] if node.module else []))
            if base.startswith("gpudisk_top"):
                for a in node.names:      # `from pkg import module` imports the module
                    sub = f"{base}.{a.name}"
                    found.add(sub if sub in modules else base)
    return {m for m in found if m in modules and m != name}


def part_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "(package)"


def layer_of(part: str) -> int:
    for i, parts in enumerate(LAYERS):
        if part in parts:
            return i
    raise AssertionError(f"{part}: not in any layer of tests/test_layering.py LAYERS")


@functools.cache
def import_graph() -> dict[str, set[str]]:
    modules = module_files()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def test_no_module_imports_a_layer_above_its_own():
    graph = import_graph()
    assert "gpudisk_top.session.live" in graph and "gpudisk_top.verdict.step" in graph
    upward = sorted(f"{m} imports {t}" for m, targets in graph.items() for t in targets
                    if layer_of(part_of(t)) > layer_of(part_of(m)))
    assert upward == []


def test_no_import_cycles():
    """No module reaches itself through its imports (Tarjan's strongly connected
    components over the whole graph, lazy imports included)."""
    graph = import_graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert cycles == []


def test_the_checker_sees_lazy_and_relative_imports(tmp_path):
    """imports_of finds an import inside a function and a relative one."""
    path = tmp_path / "m.py"
    path.write_text("def f():\n    from gpudisk_top.ui import app\nfrom . import errors\n")
    modules = {"gpudisk_top.ui.app", "gpudisk_top.errors", "gpudisk_top.ui"}
    assert imports_of("gpudisk_top.m", path, modules) == {"gpudisk_top.ui.app", "gpudisk_top.errors"}


# ---------------------------------------------------------------------------- the command line
# The command line ends at commands/ (and cli.py, which dispatches to it): a command reads
# its argparse namespace and hands typed options (ExportOptions, AlertOptions, a Source, a
# config) down.  Below it nothing imports argparse or reads a namespace: no `args.x`, no
# getattr(args, ...), no vars(args).
COMMAND_LINE = ("gpudisk_top.commands", "gpudisk_top.cli", "gpudisk_top.__main__")


def namespace_reads(path: Path) -> list[str]:
    """'LINE: what' for each argparse import and each read of a variable named `args` as a
    namespace (an attribute of it, getattr or vars of it) in the file at `path`."""
    found = []
    for node in ast.walk(tree_of(path)):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "argparse"
                                                 for a in node.names):
            found.append(f"{node.lineno}: import argparse")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "argparse":
            found.append(f"{node.lineno}: from argparse import")
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
              and node.value.id == "args"):
            found.append(f"{node.lineno}: args.{node.attr}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "vars", "hasattr") and node.args
              and isinstance(node.args[0], ast.Name) and node.args[0].id == "args"):
            found.append(f"{node.lineno}: {node.func.id}(args)")
    return found


def test_nothing_below_commands_reads_the_command_line():
    modules = module_files()
    below = {name: path for name, path in modules.items()
             if not name.startswith(COMMAND_LINE)}
    assert "gpudisk_top.exporter.hooks" in below and "gpudisk_top.commands.common" not in below
    reads = sorted(f"{name}:{line}" for name, path in below.items()
                   for line in namespace_reads(path))
    assert reads == []


def test_the_namespace_checker_sees_each_kind_of_read(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("import argparse\nfrom argparse import Namespace\n"
                    "def f(args, other):\n"
                    "    a = args.listen\n    b = getattr(args, 'push', None)\n"
                    "    c = vars(args)\n    d = other.listen\n    e = getattr(other, 'x')\n")
    assert namespace_reads(path) == ["1: import argparse", "2: from argparse import",
                                     "4: args.listen", "5: getattr(args)", "6: vars(args)"]


# ---------------------------------------------------------------------------- inside record/
def test_record_v2_does_not_import_record_above_it():
    """Direction inside a part: the format-2 codec (record/v2/) is what record/'s reader,
    index and recorder are built on, so nothing in it imports a module of record/ outside
    record/v2/ (lazy imports included)."""
    graph = import_graph()
    inside = sorted(m for m in graph if m.startswith("gpudisk_top.record.v2"))
    assert "gpudisk_top.record.v2.summary" in inside
    upward = sorted(f"{m} imports {t}" for m in inside for t in graph[m]
                    if t.startswith("gpudisk_top.record") and not t.startswith("gpudisk_top.record.v2"))
    assert upward == []
