"""The one import of a TOML parser: the standard library's `tomllib` (Python 3.11+), or
`tomli` where it is older.  tomli is the package tomllib was taken from, with the same
API (`loads`, `TOMLDecodeError`), so callers use the name `tomllib` either way: on Python
3.10, as Ubuntu 22.04 and the CUDA images built on it ship, `import tomllib` alone fails.
Raises nothing itself; ModuleNotFoundError where neither is installed (pyproject declares
tomli for Python < 3.11)."""

from __future__ import annotations

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:   # pragma: no cover - exercised by the pyz tests under CPython 3.10
    import tomli as tomllib

__all__ = ["tomllib"]
