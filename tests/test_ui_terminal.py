"""The real console script in real terminals: tmux (and GNU screen where installed), with
16 colours, 256 colours, truecolor and NO_COLOR, resized from 80x24 to 250x70 and back,
and as a non-root user with no /sys, as inside `docker exec -it`."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
import uuid

import pytest

BIN = os.path.dirname(sys.executable)
EXE = shutil.which("gpudisk-top", path=BIN) or shutil.which("gpudisk-top")

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None or EXE is None,
                                reason="needs tmux and the installed gpudisk-top script")


class Tmux:
    def __init__(self, command: str, width: int = 120, height: int = 40, env: dict | None = None):
        self.name = f"gdt-{uuid.uuid4().hex[:8]}"
        # COLUMNS/LINES (pytest sets them) would pin the size and hide every resize
        exports = "unset COLUMNS LINES; " + " ".join(f"export {k}={v};" for k, v in (env or {}).items())
        subprocess.run(["tmux", "new-session", "-d", "-s", self.name, "-x", str(width),
                        "-y", str(height), f"{exports} {command}"], check=True)
        # a detached session follows no client: keep the size we asked for
        subprocess.run(["tmux", "set-option", "-t", self.name, "window-size", "manual"],
                       capture_output=True)

    def capture(self, escapes: bool = False) -> str:
        args = ["tmux", "capture-pane", "-p", "-t", self.name] + (["-e"] if escapes else [])
        return subprocess.run(args, capture_output=True, text=True).stdout

    def wait_for(self, *needles: str, timeout_s: float = 15.0) -> str:
        deadline = time.monotonic() + timeout_s
        screen = ""
        while time.monotonic() < deadline:
            screen = self.capture()
            if all(n in screen for n in needles):
                return screen
            time.sleep(0.2)
        raise AssertionError(f"{needles} not on screen after {timeout_s} s:\n{screen}")

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", self.name, *keys], check=True)

    def resize(self, width: int, height: int) -> None:
        # a detached session follows no client: make its size manual, then set it
        subprocess.run(["tmux", "set-option", "-t", self.name, "window-size", "manual"], check=True)
        subprocess.run(["tmux", "resize-window", "-t", self.name, "-x", str(width), "-y", str(height)],
                       check=True)

    def alive(self) -> bool:
        return subprocess.run(["tmux", "has-session", "-t", self.name],
                              capture_output=True).returncode == 0

    def processes(self) -> list[int]:
        """The pane's process and all its descendants."""
        out = subprocess.run(["tmux", "display", "-p", "-t", self.name, "#{pane_pid}"],
                             capture_output=True, text=True).stdout.strip()
        todo, seen = ([int(out)] if out.isdigit() else []), []
        while todo:
            pid = todo.pop()
            seen.append(pid)
            for task in os.listdir(f"/proc/{pid}/task") if os.path.isdir(f"/proc/{pid}/task") else ():
                try:
                    with open(f"/proc/{pid}/task/{task}/children") as f:
                        todo.extend(int(c) for c in f.read().split())
                except OSError:
                    pass
        return seen

    def close(self) -> list[int]:
        """Kill the session (its terminal hangs up); returns the processes it had."""
        pids = self.processes() if self.alive() else []
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)
        return pids


@pytest.fixture
def tmux():
    sessions = []

    def start(*args, **kwargs):
        s = Tmux(*args, **kwargs)
        sessions.append(s)
        return s

    yield start
    pids = [pid for s in sessions for pid in s.close()]
    # a dashboard whose terminal went away must leave (it checks once a second)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(os.path.exists(f"/proc/{p}") for p in pids):
        time.sleep(0.2)
    left = [p for p in pids if os.path.exists(f"/proc/{p}")]
    for p in left:
        subprocess.run(["kill", "-9", str(p)], capture_output=True)
    assert not left, f"processes left running after their terminal closed: {left}"


SGR = re.compile(r"\x1b\[([0-9;]*)m")
_GREY_CUBE = {16, 59, 102, 145, 188, 231}


def colours(screen: str) -> tuple[set, set]:
    """(hues, greys) named by the SGR colour codes in `screen`."""
    hues, greys = set(), set()
    for params in SGR.findall(screen):
        p = [int(x) for x in params.split(";") if x.isdigit()]
        i = 0
        while i < len(p):
            code = p[i]
            if code in (38, 48) and i + 2 < len(p) and p[i + 1] == 5:
                n = p[i + 2]
                (greys if n in _GREY_CUBE or n >= 232 or n in (0, 7, 8, 15) else hues).add(n)
                i += 3
            elif code in (38, 48) and i + 4 < len(p) and p[i + 1] == 2:
                r, g, b = p[i + 2:i + 5]
                (greys if r == g == b else hues).add((r, g, b))
                i += 5
            else:
                if 31 <= code <= 36 or 41 <= code <= 46 or 91 <= code <= 96 or 101 <= code <= 106:
                    hues.add(code)
                i += 1
    return hues, greys


@pytest.mark.parametrize("env", [
    {"TERM": "xterm"},
    {"TERM": "xterm-256color"},
    {"TERM": "xterm-256color", "COLORTERM": "truecolor"},
    {"TERM": "xterm-256color", "NO_COLOR": "1"},
], ids=["16-colours", "256-colours", "truecolor", "no-color"])
def test_dashboard_in_tmux(tmux, env):
    # 90 simulated seconds in: a disk-starvation episode is open
    t = tmux(f"{EXE} --demo --demo-start 90", env=env)
    screen = t.wait_for("DEMO", "Timeline", "GPUs (8)", "DISK-STARVED", "Quit")
    assert "Traceback" not in screen
    # meaning never by colour alone: the starved columns carry their letter
    state_row = next(line for line in screen.splitlines() if line.startswith("state"))
    assert "DDDD" in state_row and "▲sdb" in screen
    hues, greys = colours(t.capture(escapes=True))
    if "NO_COLOR" in env:
        assert not hues, f"colours despite NO_COLOR: {sorted(hues, key=str)[:5]}"
    else:
        assert hues
    t.keys("q")
    deadline = time.monotonic() + 5
    while t.alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not t.alive(), "q did not quit"


def test_resize_from_80x24_to_250x70_and_back(tmux):
    t = tmux(f"{EXE} --demo --demo-start 90", width=80, height=24, env={"TERM": "xterm-256color"})
    t.wait_for("DEMO", "Timeline", "Quit")
    time.sleep(1)  # let start-up finish: a resize signal before Textual listens is lost
    for width, height in ((250, 70), (80, 24), (120, 40), (80, 24)):
        t.resize(width, height)
        deadline = time.monotonic() + 10
        while True:  # until the app has laid itself out again: its footer on the last row
            lines = t.capture().split("\n")[:height]
            if len(lines) == height and "Quit" in lines[-1] or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        screen = "\n".join(lines)
        assert "Quit" in lines[-1], f"no footer on row {height} at {width}x{height}:\n{screen}"
        assert lines[0].startswith("gpudisk-top") and "DISK-STARVED" in screen
        assert max(len(line) for line in lines) <= width
        assert "Traceback" not in screen


@pytest.mark.skipif(shutil.which("screen") is None, reason="GNU screen is not installed")
def test_dashboard_in_gnu_screen(tmp_path):
    name = f"gdt{uuid.uuid4().hex[:6]}"
    dump = tmp_path / "hardcopy.txt"
    env = dict(os.environ, TERM="xterm-256color")
    subprocess.run(["screen", "-dmS", name, "-h", "0", EXE, "--demo"], check=True, env=env)
    try:
        deadline = time.monotonic() + 15
        text = ""
        while time.monotonic() < deadline:
            subprocess.run(["screen", "-S", name, "-X", "hardcopy", str(dump)], capture_output=True)
            text = dump.read_text(errors="replace") if dump.exists() else ""
            if "DEMO" in text and "Timeline" in text:
                break
            time.sleep(0.3)
        assert "DEMO" in text and "Timeline" in text, text
    finally:
        subprocess.run(["screen", "-S", name, "-X", "quit"], capture_output=True)


def _as_nobody_command(tmpdir: str) -> list[str] | None:
    """argv prefix that runs this checkout as user nobody with the system's Python of the
    same version and this environment's packages; None where that cannot be arranged.

    setpriv changes the user and execs, nothing else: the process stays in the foreground
    of the terminal, as in `docker exec -it -u user` (runuser would open a PAM session)."""
    if shutil.which("setpriv") is None:
        return None
    py = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    if not os.path.exists(py):
        return None
    pkg = os.path.join(tmpdir, "pkg")
    shutil.copytree(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                 "gpudisk_top"), os.path.join(pkg, "gpudisk_top"))
    os.chmod(tmpdir, 0o755)
    path = f"{pkg}:{sysconfig.get_paths()['purelib']}:{sysconfig.get_paths()['platlib']}"
    argv = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
            "env", "HOME=/tmp", f"PYTHONPATH={path}", py]
    probe = subprocess.run(argv + ["-c", "import textual, psutil, pynvml, gpudisk_top"],
                           capture_output=True, text=True)
    return argv if probe.returncode == 0 else None


@pytest.mark.root(reason="running as user nobody (setpriv) needs root")
def test_non_root_without_sys(tmux):
    """As inside `docker exec -it` as a non-root user in a container with no /sys."""
    with tempfile.TemporaryDirectory() as tmpdir:
        argv = _as_nobody_command(tmpdir)
        if argv is None:
            pytest.skip("cannot run as nobody here (no setpriv, or no system Python that "
                        "can read this environment's packages)")
        cmd = " ".join(argv + ["-m", "gpudisk_top", "--sysfs", "/nonexistent"])
        t = tmux(cmd, env={"TERM": "xterm-256color"})
        screen = t.wait_for("Timeline", "NO GPUS", "GPUs: none readable", "Device", "Quit",
                            timeout_s=20)
        # the disks are live (from /proc) even though their class cannot be known
        disk_row = re.compile(r"^.{1,3}\S+\s+\?\s+\d", re.M)
        deadline = time.monotonic() + 10
        while not disk_row.search(screen) and time.monotonic() < deadline:
            time.sleep(0.3)
            screen = t.capture()
        assert disk_row.search(screen), screen
        assert "Traceback" not in screen
        t.keys("q")
        deadline = time.monotonic() + 5
        while t.alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not t.alive(), "q did not quit"


def test_dashboard_records_while_it_runs(tmux, tmp_path):
    from gpudisk_top.record import Recording

    path = tmp_path / "dash.gdtrec"
    t = tmux(f"{EXE} --demo --record {path}", width=80, height=24, env={"TERM": "xterm-256color"})
    screen = t.wait_for("DEMO", "Timeline", "Quit")
    # the header says it records, at 80 columns too (issue 23)
    assert re.search(r"\sREC\s", screen.split("\n")[0] + " "), screen
    time.sleep(3)
    t.keys("F10")                  # quits, as in htop and nvitop
    deadline = time.monotonic() + 5
    while t.alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not t.alive(), "F10 did not quit"
    with Recording.open(str(path)) as rec:
        assert len(rec) >= 3 and rec.header["simulated"] is True
        assert rec.sessions[-1].end is not None   # closed cleanly on quit
        assert len(rec.sample(len(rec) - 1).gpu.gpus) == 8


@pytest.mark.parametrize("how", ["stderr-to-a-file", "setsid"])
def test_dashboard_draws_on_the_terminal_when_stderr_is_a_file(tmux, tmp_path, how):
    """`gpudisk-top 2>warnings.log`: Textual draws on stderr, so the screen once went into
    the log and the terminal stayed blank.  Under setsid the terminal is not the process's
    controlling one: the dashboard must run, not say its terminal is gone."""
    log = tmp_path / "warnings.log"
    prefix = "setsid -w " if how == "setsid" else ""
    t = tmux(f"{prefix}{EXE} --demo --demo-start 90 2>{log}; echo EXITED $?; sleep 30",
             env={"TERM": "xterm-256color"})
    t.wait_for("DEMO", "Timeline", "DISK-STARVED", "Quit")
    time.sleep(2.5)                      # past the once-a-second terminal check
    assert "EXITED" not in t.capture()
    t.keys("q")
    t.wait_for("EXITED 0", timeout_s=10)
    text = log.read_text(errors="replace")
    assert "\x1b[" not in text, f"the screen went into the log: {text[:200]!r}"
    assert "terminal is gone" not in text
