"""gpudisk-top.pyz (tools/build_pyz.py, tools/pyz_main.py): built once for the module, then
run as a user would run it on a node or in a container: `python3 gpudisk-top.pyz` with each
CPython this machine has, beside a job's old packages, from read-only directories, as
user nobody, in another PID and mount namespace with a noexec /tmp it was piped into; and
damaged, truncated, with a cache directory that is a symlink, not ours or full."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
import zlib
from pathlib import Path

import pytest

import pyz_build
from pythons import PYENV, PYTHONS, SUPPORTED, WANTED, python_for, version_of

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "tools" / "build_pyz.py"
IS_ROOT = os.geteuid() == 0


@pytest.fixture(scope="module")
def pyz() -> Path:
    return pyz_build.built()[0]


@pytest.fixture
def old_packages(tmp_path) -> Path:
    """A job's packages: an old rich and textual, another gpudisk_top, and modules named as
    the standard library's (a PYTHONPATH comes ahead of it: an old `typing` or `enum`
    backport is the classic case; not one the interpreter's own start imports, as pyenv's
    certifi .pth imports tempfile and zipfile: that stops every program before any code of ours runs),
    each of which says so and stops the program the moment it is imported."""
    site = tmp_path / "job-site"
    for name in ("rich", "textual", "gpudisk_top", "plotext", "json", "argparse"):
        (site / name).mkdir(parents=True)
        (site / name / "__init__.py").write_text(f"raise SystemExit('the job\\'s {name} was imported')\n")
    return site


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}
    env.update(extra)
    return env


def _run(argv, env, cwd, timeout=120, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, **kw)


def _once_json(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["source"].startswith("simulated") and doc["gpus"], doc.keys()
    return doc


def test_the_zip_is_pure_python_and_holds_no_build_script(pyz):
    with zipfile.ZipFile(pyz) as zf:
        names = zf.namelist()
    assert "__main__.py" in names and "lib/gpudisk_top/cli.py" in names
    assert "lib/gpudisk_top/sim/scenarios/demo.toml" in names   # package data
    assert any(n.startswith("lib/tomli/") for n in names)       # tomllib before 3.11
    assert not [n for n in names if n.startswith("lib/psutil")]
    assert not [n for n in names if "build_pyz" in n or n.endswith((".so", ".pyc"))]
    assert pyz.stat().st_size < 8_000_000
    assert not pyz.stat().st_mode & 0o111   # no exec bit:
    # it runs as `python3 FILE` (the tests below), so a noexec /tmp is no obstacle
    first = pyz.read_bytes().split(b"\n", 1)[0]   # no shebang naming one interpreter
    assert first.startswith(b"# coding: gpudisk-top.pyz-is-truncated-"), first


def test_pure_by_construction_any_cpu_and_c_library(pyz, tmp_path):
    """aarch64 and musl cannot be run here: what makes the zip run there is that it holds
    nothing built for one CPU or C library.  No compiled file by name or by content (ELF,
    Mach-O, PE), every wheel it came from tagged `none-any` and purelib, and every module
    compiles under 3.10's grammar (the oldest the zip runs on)."""
    compiled = (".so", ".pyd", ".dylib", ".dll", ".a", ".o", ".pyc", ".pyo")
    magics = (b"\x7fELF", b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe", b"\xca\xfe\xba\xbe",
              b"MZ")
    with zipfile.ZipFile(pyz) as zf:
        names = zf.namelist()
        bad = [n for n in names if n.endswith(compiled) or ".cpython-" in n or ".so." in n
               or "-linux-gnu" in n or "-linux-musl" in n
               or zf.read(n)[:4].startswith(magics)]
        assert bad == []
        wheels = [n for n in names if n.endswith(".dist-info/WHEEL")]
        assert len(wheels) >= 8   # textual, rich, nvidia-ml-py, plotext, prometheus_client, ...
        for wheel in wheels:
            fields = [line.split(": ", 1) for line in zf.read(wheel).decode().splitlines()
                      if ": " in line]
            tags = [v for k, v in fields if k == "Tag"]
            assert tags and all(t.endswith("-none-any") for t in tags), (wheel, tags)
            assert ["Root-Is-Purelib", "true"] in fields, wheel
        zf.extractall(tmp_path / "x")
    python = python_for("3.10")
    proc = _run([python, "-m", "compileall", "-q", str(tmp_path / "x")], _env(tmp_path), tmp_path,
                timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert len(list((tmp_path / "x").rglob("*.cpython-310.pyc"))) >= 1000


def test_the_stub_and_launcher_compile_under_the_oldest_python_here(tmp_path):
    """They must read as far as the launcher's one-line refusal under any Python: 2.7's
    and 3.0's syntax (the rest of the zip is 3.10's)."""
    oldest = min(PYTHONS, key=lambda v: tuple(map(int, v.split("."))))
    if oldest not in ("2.7", "3.6", "3.7", "3.8", "3.9"):
        pytest.skip(f"no CPython older than 3.10 on this machine (looked in {PYENV}); "
                    f"found: {', '.join(sorted(PYTHONS))}")
    for name in ("pyz_stub.py", "pyz_main.py"):
        shutil.copyfile(ROOT / "tools" / name, tmp_path / name)
        proc = _run([PYTHONS[oldest], "-m", "py_compile", str(tmp_path / name)], _env(tmp_path),
                    tmp_path)
        assert proc.returncode == 0, (oldest, name, proc.stderr)


def test_the_build_writes_and_prints_the_sha256sum_line(pyz):
    """`sha256sum -c` checks a copy in the directory the .sha256 file lies in."""
    line = (pyz.parent / "gpudisk-top.pyz.sha256").read_text()
    assert line == f"{hashlib.sha256(pyz.read_bytes()).hexdigest()}  gpudisk-top.pyz\n"
    assert pyz_build.built()[1].endswith(line)   # printed too
    if shutil.which("sha256sum"):
        proc = subprocess.run(["sha256sum", "-c", "gpudisk-top.pyz.sha256"], cwd=pyz.parent,
                              capture_output=True, text=True, timeout=30)
        assert proc.returncode == 0 and proc.stdout == "gpudisk-top.pyz: OK\n", proc


def test_the_stub_checks_every_byte_from_the_launcher_to_the_directory(pyz):
    """The stub's CHECK (filled by the build) covers the launcher and every lib/ member:
    all a flipped byte can garble before the zip's directory."""
    with zipfile.ZipFile(pyz) as zf:
        stub = zf.read("__main__.py").decode()
        launcher, first_lib = zf.infolist()[1], zf.infolist()[2]
        start_dir = zf.start_dir
    check = re.search(r'^CHECK = "(\d{10})-(\d{10})-([0-9a-f]{8})-(\d{10})-(\d{10})"$', stub, re.M)
    assert check, stub
    start, end, crc, source_start, source_end = check.groups()
    data = pyz.read_bytes()
    assert launcher.filename == "pyz_main.py" and first_lib.filename.startswith("lib/")
    assert int(start) == launcher.header_offset and int(end) == start_dir
    assert zlib.crc32(data[int(start):int(end)]) == int(crc, 16)
    assert data[int(source_start):int(source_end)] == (ROOT / "tools" / "pyz_main.py").read_bytes()


def _build_module():
    spec = importlib.util.spec_from_file_location("build_pyz", BUILD)
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    return build


def test_two_builds_of_the_same_files_are_the_same_bytes(tmp_path):
    """No time or order of the build machine's in the zip: a sha256 names one tree."""
    build = _build_module()
    lib = tmp_path / "lib"
    (lib / "pkg" / "sub").mkdir(parents=True)
    (lib / "pkg" / "__init__.py").write_text("x = 1\n")
    (lib / "pkg" / "sub" / "data.toml").write_text("a = 2\n")
    build.write_zip(lib, tmp_path / "one.pyz")
    time.sleep(1.1)   # a zip's dates have 2 s steps: cross one more often than not
    os.utime(lib / "pkg" / "__init__.py")
    build.write_zip(lib, tmp_path / "two.pyz")
    assert (tmp_path / "one.pyz").read_bytes() == (tmp_path / "two.pyz").read_bytes()


def test_the_build_refuses_a_compiled_file(tmp_path):
    build = _build_module()
    (tmp_path / "lib" / "pkg").mkdir(parents=True)
    (tmp_path / "lib" / "pkg" / "__init__.py").write_text("")
    build.refuse_compiled(tmp_path)   # pure: nothing said
    shutil.copyfile("/bin/true", tmp_path / "lib" / "pkg" / "kernel")   # an ELF, any name
    with pytest.raises(build.BuildError, match="compiled file .*lib/pkg/kernel"):
        build.refuse_compiled(tmp_path)


@pytest.mark.parametrize("version", WANTED)
def test_once_json_with_each_python_beside_a_jobs_old_packages(pyz, tmp_path, old_packages, version):
    """PYTHONPATH and the working directory hold a job's old rich, textual and another
    gpudisk_top; the running Python may have its own (the test's venv has gpudisk_top as an
    editable install): none is imported.  The first start makes the cache copy, the second
    uses it."""
    python = python_for(version)
    cwd = tmp_path / "job"
    shutil.copytree(old_packages, cwd)
    env = _env(tmp_path / "home", PYTHONPATH=str(old_packages))
    for start, flags in (("first", []), ("second", []), ("isolated by Python too", ["-I"])):
        proc = _run([python, *flags, str(pyz), "--once", "--json", "--demo"], env, cwd)
        _once_json(proc)
        assert proc.stderr == "", (start, proc.stderr)
    copies = list((tmp_path / "home" / ".cache" / "gpudisk-top").glob("pyz-*/lib/gpudisk_top/cli.py"))
    assert len(copies) == 1
    assert list(copies[0].parent.glob("__pycache__/cli.cpython-*.pyc"))   # bytecode kept


def test_a_python_too_old_is_one_line_naming_the_one_needed(pyz, tmp_path):
    old = {v: p for v, p in PYTHONS.items() if v not in SUPPORTED}
    if not old:
        pytest.skip(f"no CPython older than 3.10 on this machine (looked in {PYENV})")
    for version, python in old.items():   # 2.7 and 3.6 to 3.9 on the development machine
        proc = _run([python, str(pyz), "--once", "--demo"], _env(tmp_path), tmp_path)
        assert proc.returncode == 2 and proc.stdout == ""
        assert proc.stderr.count("\n") == 1, proc.stderr
        assert proc.stderr.startswith(f"gpudisk-top: error: this is Python {version} (")
        assert "needs Python 3.10 or newer" in proc.stderr


def test_record_and_report_from_the_zip(pyz, tmp_path):
    env = _env(tmp_path)
    rec = tmp_path / "demo.gdtrec"
    proc = _run([sys.executable, str(pyz), "record", "-o", str(rec), "--duration", "3",
                 "--demo", "-q"], env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    proc = _run([sys.executable, str(pyz), "report", str(rec)], env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "4 samples" in proc.stdout and "Time in each state, per GPU" in proc.stdout
    assert "GPU utilization, %" in proc.stdout and "┤" in proc.stdout   # plotext 5 drew it


def _flipped(pyz: Path, member: str, out: Path) -> Path:
    """A copy of the zip with one byte of `member`'s data flipped, in its middle: the zip's
    directory intact, the member's CRC wrong."""
    data = bytearray(pyz.read_bytes())
    with zipfile.ZipFile(pyz) as zf:
        info = zf.getinfo(member)
    header = data[info.header_offset:info.header_offset + 30]
    start = (info.header_offset + 30 + int.from_bytes(header[26:28], "little")
             + int.from_bytes(header[28:30], "little"))
    data[start + info.compress_size // 2] ^= 0xFF
    out.write_bytes(bytes(data))
    return out


# the launcher (stored), a module of ours the first import reaches, one of a dependency's
# only the dashboard imports (deflated)
DAMAGED_MEMBERS = ("pyz_main.py", "lib/gpudisk_top/cli.py", "lib/textual/widgets/_tree.py")


def _damaged_runs_say_one_line(pyz: Path, tmp_path: Path, python: str) -> None:
    for member in DAMAGED_MEMBERS:
        bad = _flipped(pyz, member, tmp_path / "gpudisk-top.pyz")
        for cache in ("on", "off"):
            env = _env(tmp_path / "home", GPUDISK_TOP_PYZ_CACHE=cache)
            proc = _run([python, str(bad), "--once", "--demo"], env, tmp_path)
            said = (python, member, cache, proc.stderr)
            assert proc.returncode == 2 and proc.stdout == "", said
            assert proc.stderr == (f"gpudisk-top: error: {bad} is damaged (its CRC-32 does not "
                                   f"match the build's): copy it again, and compare its "
                                   f"sha256sum with the build's (the gpudisk-top.pyz.sha256 "
                                   f"that tools/build_pyz.py writes beside the zip)\n"), said
    assert not (tmp_path / "home" / ".cache").exists()   # nothing was extracted


@pytest.mark.parametrize("version", WANTED)
def test_a_damaged_member_is_one_line_with_each_python(pyz, tmp_path, version):
    _damaged_runs_say_one_line(pyz, tmp_path, python_for(version))


def test_a_damaged_member_is_the_same_line_with_an_older_python(pyz, tmp_path):
    """The stub checks before the launcher refuses an old Python: a damaged copy is said
    to be damaged whatever runs it."""
    old = {v: p for v, p in PYTHONS.items() if v not in SUPPORTED}
    if not old:
        pytest.skip(f"no CPython older than 3.10 on this machine (looked in {PYENV})")
    for python in old.values():
        _damaged_runs_say_one_line(pyz, tmp_path, python)


def test_a_member_damaged_in_the_copy_the_cache_made_is_one_line(pyz, tmp_path):
    """The zip intact, its cached copy's module damaged on disk: zipfile's CRC is not
    asked again, but the module's source no longer compiles (the launcher's own line)."""
    env = _env(tmp_path / "home")
    _once_json(_run([sys.executable, str(pyz), "--once", "--json", "--demo"], env, tmp_path))
    cli, = (tmp_path / "home" / ".cache" / "gpudisk-top").glob("pyz-*/lib/gpudisk_top/cli.py")
    shutil.rmtree(cli.parent / "__pycache__")
    cli.write_bytes(cli.read_bytes()[:len(cli.read_bytes()) // 2] + b"\xff(\n")
    proc = _run([sys.executable, str(pyz), "--once", "--demo"], env, tmp_path)
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(f"gpudisk-top: error: {pyz} is damaged (")


# what each CPython prints for a file whose end (the zip's directory) is lost: Python
# runs it as a script, and reads the build's first line's coding cookie before anything
# else; 3.9 and later print only the SyntaxError line, older ones a `File` line above it
TRUNCATED_SAYS = ("SyntaxError: encoding problem: gpudisk-top.pyz-is-truncated-or-not-a-whole-"
                  "zip--copy-it-again-and-compare-its-sha256sum-with-gpudisk-top.pyz.sha256")


@pytest.mark.parametrize("version", WANTED)
def test_a_truncated_zip_is_one_line_with_each_python(pyz, tmp_path, version):
    python = python_for(version)
    short = tmp_path / "gpudisk-top.pyz"
    for keep in (2 / 3, 1 / 2, 0.999):
        short.write_bytes(pyz.read_bytes()[: int(pyz.stat().st_size * keep)])
        proc = _run([python, str(short), "--once", "--demo"], _env(tmp_path), tmp_path)
        assert (proc.returncode, proc.stdout, proc.stderr) == (1, "", TRUNCATED_SAYS + "\n")


def test_a_truncated_zip_with_an_older_python_says_the_same_last(pyz, tmp_path):
    old = {v: p for v, p in PYTHONS.items() if v not in SUPPORTED}
    if not old:
        pytest.skip(f"no CPython older than 3.10 on this machine (looked in {PYENV})")
    short = tmp_path / "gpudisk-top.pyz"
    short.write_bytes(pyz.read_bytes()[: pyz.stat().st_size // 2])
    for version, python in old.items():
        proc = _run([python, str(short)], _env(tmp_path), tmp_path)
        lines = proc.stderr.splitlines()
        assert proc.returncode == 1 and lines[-1] == TRUNCATED_SAYS, (version, proc.stderr)
        assert len(lines) == 1 or (len(lines) == 2 and lines[0].startswith("  File ")), lines


def test_a_cache_that_is_a_symlink_is_refused_with_a_warning(pyz, tmp_path):
    cache = tmp_path / "xdg-cache"
    cache.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (cache / "gpudisk-top").symlink_to(elsewhere)
    env = _env(tmp_path / "home", XDG_CACHE_HOME=str(cache))
    proc = _run([sys.executable, str(pyz), "--once", "--json", "--demo"], env, tmp_path)
    _once_json(proc)
    assert proc.stderr == (f"gpudisk-top: warning: cache directory {cache / 'gpudisk-top'} is a "
                           f"symlink: running from the zip (a slower start)\n")
    assert list(elsewhere.iterdir()) == []


@pytest.mark.root(reason="a cache directory owned by another user needs chown")
def test_a_cache_that_is_not_ours_is_refused_with_a_warning(pyz, tmp_path):
    if not IS_ROOT:
        pytest.skip("not root: cannot give a directory to another user")
    cache = tmp_path / "xdg-cache" / "gpudisk-top"
    cache.mkdir(parents=True, mode=0o700)
    os.chown(cache, 65534, 65534)
    env = _env(tmp_path / "home", XDG_CACHE_HOME=str(cache.parent))
    proc = _run([sys.executable, str(pyz), "--once", "--json", "--demo"], env, tmp_path)
    _once_json(proc)
    assert proc.stderr == (f"gpudisk-top: warning: cache directory {cache} is not yours (owner "
                           f"uid 65534): running from the zip (a slower start)\n")
    assert list(cache.iterdir()) == []


@pytest.mark.root(reason="a full filesystem is a small tmpfs mounted in a mount namespace")
def test_a_full_cache_runs_from_the_zip_and_leaves_no_partial_copy(pyz, tmp_path):
    if not IS_ROOT or shutil.which("unshare") is None:
        pytest.skip("not root, or no unshare: cannot mount a small tmpfs")
    cache = tmp_path / "xdg-cache"
    cache.mkdir()
    script = (f'mount -t tmpfs -o size=512k tmpfs "{cache}" && "$0" "{pyz}" --once --json --demo'
              f' && ls -A "{cache}/gpudisk-top"')
    env = _env(tmp_path / "home", XDG_CACHE_HOME=str(cache))
    proc = _run(["unshare", "-m", "--propagation", "private", "sh", "-c", script,
                 sys.executable], env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == (f"gpudisk-top: warning: cache directory {cache / 'gpudisk-top'} is full:"
                           f" running from the zip (a slower start)\n")
    doc, _, listing = proc.stdout.rpartition("}\n")
    _once_json(subprocess.CompletedProcess([], 0, doc + "}", ""))
    assert listing == ""   # the partial copy was removed


@pytest.mark.root(reason="namespaces, mounts and running as nobody need root")
def test_piped_into_another_namespace_and_run_as_nobody_from_read_only_dirs(pyz, tmp_path):
    """`kubectl exec -i POD -- sh -c 'cat > /tmp/gpudisk-top.pyz'`, then run there: a new
    PID and mount namespace whose /tmp is a fresh noexec tmpfs the zip is piped into, a
    read-only working directory and HOME, as user nobody, with the system's python3 (the
    test's own Python lies under /root, which nobody cannot read)."""
    python = "/usr/bin/python3"
    if not IS_ROOT or not shutil.which("unshare") or not shutil.which("setpriv"):
        pytest.skip("not root, or no unshare or setpriv")
    if (version_of(python) or (0, 0)) < (3, 10):
        pytest.skip("no system python3 3.10 or newer for user nobody")
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(tmp_path, 0o755)
    os.chmod(ro, 0o755)
    nobody = "setpriv --reuid 65534 --regid 65534 --clear-groups"
    # the read-only directory is bound onto /mnt first: the tmpfs over /tmp hides tmp_path
    script = (f'mount --bind "{ro}" /mnt && mount -o remount,bind,ro /mnt && cd /mnt '
              f'&& ! touch /mnt/w 2>/dev/null '
              f'&& mount -t tmpfs -o noexec,mode=1777 tmpfs /tmp && sh -c "cat > /tmp/gpudisk-top.pyz" '
              f'&& {nobody} {python} /tmp/gpudisk-top.pyz --once --json --demo '
              f'&& {nobody} {python} /tmp/gpudisk-top.pyz --once --json >/tmp/real.json '
              f'&& {python} -c "import json; print(json.load(open(\'/tmp/real.json\'))[\'host\'][\'ncpu\'])" >&2')
    env = _env(Path("/mnt"))
    with open(pyz, "rb") as stdin:
        proc = _run(["unshare", "-m", "-p", "-f", "--mount-proc", "--propagation", "private",
                     "sh", "-c", script], env, tmp_path, stdin=stdin)
    assert proc.returncode == 0, proc.stderr
    _once_json(proc)
    # the real sample, read in that namespace as nobody, is whole: no warning but the GPUs'
    lines = proc.stderr.splitlines()
    assert lines[-1].isdigit() and int(lines[-1]) >= 1, proc.stderr
    assert not [line for line in lines[:-1] if "Traceback" in line or "error" in line], lines


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_the_dashboard_from_the_zip_in_tmux(pyz, tmp_path):
    """The dashboard itself (Textual, from the zip's copy of it) on a terminal, with the
    same screen the installed tool draws 90 simulated seconds into the demo; q quits."""
    from slack import slack
    from test_ui_terminal import Tmux
    t = Tmux(f"cd {tmp_path} && HOME={tmp_path} {sys.executable} {pyz} --demo --demo-start 90",
             env={"TERM": "xterm-256color"})
    try:
        screen = t.wait_for("DEMO", "Timeline", "GPUs (8)", "DISK-STARVED", "Quit",
                            timeout_s=20 * slack())
        assert "Traceback" not in screen and "gpudisk-top: error" not in screen
        t.keys("q")
        deadline = time.monotonic() + 5 * slack()
        while t.alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not t.alive(), "q did not quit"
    finally:
        t.close()
