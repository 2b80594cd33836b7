"""Alerts against the machine's hostile text (issue 25, items 8 and 9): a verdict's reason
with ESC, BEL and a line break reaches log files, stderr, {message} and GDT_ALERT_MESSAGE
escaped; a shell given a placeholder in its -c script is refused at load, with the safe
forms, unless the rule says allow_shell = true, which is then warned at every start."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from model_factory import model, verdict
from gpudisk_top import config
from gpudisk_top.alerts import AlertEngine, AlertRule
from gpudisk_top.verdict.detect import STARVED_STATES

EVIL = "GPU 0 idle\x1b]2;pwned\x07\x1b[2J\nFAKE 2026 gpudisk-top alert forged"
ESCAPED = "GPU 0 idle\\x1b]2;pwned\\x07\\x1b[2J\\x0aFAKE 2026 gpudisk-top alert forged"
RAW = ("\x1b", "\x07")


def starved_rule(**kw) -> AlertRule:
    base = dict(name="starving", kind="verdict", states=tuple(sorted(STARVED_STATES)),
                for_samples=1, cooldown_s=0.0, log=None)
    base.update(kw)
    return AlertRule(**base)


def fire(*rules, stderr=None):
    warns: list[str] = []
    eng = AlertEngine(rules, stderr=stderr, warn=warns.append, host_name="node-1")
    state = sorted(STARVED_STATES)[0]
    fired = eng.update(model(1), verdict(state, reason=EVIL))
    return eng, fired, warns


def wait_for(predicate, timeout_s=30.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_a_log_file_and_stderr_get_one_escaped_line(tmp_path):
    log = tmp_path / "alerts.log"
    stream = io.StringIO()
    eng, fired, _ = fire(starved_rule(log=str(log)), starved_rule(name="err", log="stderr"),
                         stderr=stream)
    eng.close()          # the log is written off the sampling thread; close waits for it
    text = log.read_text()
    assert not any(c in text for c in RAW)
    assert text.count("\n") == 1 and ESCAPED in text       # the forged line stays inside ours
    out = stream.getvalue()
    assert not any(c in out for c in RAW) and out.count("\n") == 1 and ESCAPED in out
    assert all("\n" not in a.message and "\x1b" not in a.message for a in fired)
    eng.commands.close(0.1)


def test_a_commands_message_and_environment_are_escaped(tmp_path):
    out = tmp_path / "out.json"
    code = ("import json, os, sys\n"
            "open(os.environ['OUT'], 'w').write(json.dumps([sys.argv[1], "
            "os.environ['GDT_ALERT_MESSAGE']]))\n")
    os.environ["OUT"] = str(out)
    try:
        eng, _, warns = fire(starved_rule(command=(sys.executable, "-c", code, "{message}")))
        assert wait_for(lambda: out.exists() and out.stat().st_size > 0), warns
    finally:
        del os.environ["OUT"]
    arg, env = json.loads(out.read_text())
    assert arg == env and ESCAPED in arg and not any(c in arg for c in RAW + ("\n",))
    eng.commands.close(1.0)


def load(tmp_path, rule: str):
    path = tmp_path / "config.toml"
    path.write_text(textwrap.dedent(rule))
    return config.load(str(path))


SHELL_RULE = '''\
[[alerts]]
name = "notify"
verdict = "starved"
command = {argv}
'''


@pytest.mark.parametrize("argv", [
    '["/bin/sh", "-c", "echo {message}"]',
    '["bash", "-ec", "logger {mountpoint}"]',
    '["/usr/bin/env", "LC_ALL=C", "dash", "-c", "x {device}"]',
    '["/usr/local/bin/zsh", "-c", "notify {state}"]',
    '["busybox", "sh", "-c", "kill {pid}"]',
    '["bash", "-o", "pipefail", "-c", "echo {device} | logger"]',
])
def test_a_shell_with_a_placeholder_in_its_script_is_refused_with_the_safe_forms(tmp_path, argv):
    with pytest.raises(config.ConfigError) as err:
        load(tmp_path, SHELL_RULE.format(argv=argv))
    msg = str(err.value)
    assert "line 4: " in msg and "-c with {" in msg and "run as shell code" in msg
    assert '["sh", "-c", "notify \\"$1\\"", "sh", "{message}"]' in msg
    assert "allow_shell = true" in msg and "\n" not in msg


@pytest.mark.parametrize("argv", [
    '["sh", "-c", "notify \\"$1\\"", "sh", "{message}"]',   # a positional argument: data
    '["/usr/local/bin/notify", "{message}"]',
    '["sh", "-c", "notify \\"$GDT_ALERT_MESSAGE\\""]',
    '["sh", "/etc/gpudisk-top/notify.sh", "{message}"]',      # a script file, not -c
])
def test_the_safe_forms_load(tmp_path, argv):
    cfg = load(tmp_path, SHELL_RULE.format(argv=argv))
    (rule,) = cfg.sections["alerts"]
    assert rule.command and not rule.allow_shell


def test_allow_shell_loads_and_warns_at_every_start(tmp_path):
    cfg = load(tmp_path, SHELL_RULE.format(argv='["sh", "-c", "echo {message}"]')
               + "allow_shell = true\n")
    (rule,) = cfg.sections["alerts"]
    assert rule.allow_shell
    for _ in range(2):                                       # each engine is a start
        warns: list[str] = []
        AlertEngine((rule,), stderr=None, warn=warns.append, host_name="n")
        assert len(warns) == 1 and "allow_shell = true" in warns[0]
        assert "sh -c with {message}" in warns[0]
    with pytest.raises(config.ConfigError, match="allow_shell must be true or false"):
        load(tmp_path, SHELL_RULE.format(argv='["sh", "-c", "echo {message}"]')
             + 'allow_shell = "yes"\n')


def test_serve_refuses_a_shell_rule_in_one_line(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text(SHELL_RULE.format(argv='["/bin/sh", "-c", "echo {message} > /tmp/x"]'))
    proc = subprocess.run([sys.executable, "-m", "gpudisk_top", "serve", "--demo", "--config",
                           str(path), "--listen", "127.0.0.1:0", "--count", "1"],
                          capture_output=True, text=True, timeout=60,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpudisk-top: error: ")
    assert "runs /bin/sh -c with {message}" in lines[0]
