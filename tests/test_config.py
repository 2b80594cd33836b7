"""The config file: thresholds from TOML, and errors that name the line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gpudisk_top import config


def write(tmp_path, text):
    path = tmp_path / "config.toml"
    path.write_text(text)
    return str(path)


def test_thresholds_from_the_file(tmp_path):
    path = write(tmp_path, "[detector]\ngpu_low_util_pct = 60\nenter_intervals = 5\n"
                           "[detector.queue_size]\nNVMe = 64\n")
    t = config.load(path).thresholds
    assert t.gpu_low_util_pct == 60 and t.enter_intervals == 5
    assert t.queue_size["NVMe"] == 64 and t.queue_size["SSD"] == 8  # others keep defaults


def test_default_location_follows_xdg(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert config.default_path() == str(tmp_path / "gpudisk-top" / "config.toml")
    assert config.load().path is None  # absent: defaults, no error
    (tmp_path / "gpudisk-top").mkdir()
    (tmp_path / "gpudisk-top" / "config.toml").write_text("[detector]\nleave_intervals = 7\n")
    assert config.load().thresholds.leave_intervals == 7


@pytest.mark.parametrize("text, line, words", [
    ("[detector]\ngpu_low_util_pct = = 3\n", 2, "not valid TOML"),
    ("# c\n[detector]\nenter_intervals = 3\nbogus = 1\n", 4, "unknown setting detector.bogus"),
    ("[detector]\nenter_intervals = 2.5\n", 2, "whole number"),
    ("[detector]\nlatency_factor = \"x\"\n", 2, "must be a number"),
    ("[detector]\ngpu_low_util_pct = 300\n", 2, "between 0 and 100"),
    ("[detector]\n[detector.queue_size]\nNVMe = 1\nfloppy = 2\n", 4, "not a device class"),
    ("[detectr]\nx = 1\n", 1, "unknown section [detectr]"),
])
def test_bad_files_name_the_line(tmp_path, text, line, words):
    path = write(tmp_path, text)
    with pytest.raises(config.ConfigError) as err:
        config.load(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}: line {line}: "), msg
    assert words in msg and "\n" not in msg


def test_missing_explicit_file(tmp_path):
    with pytest.raises(config.ConfigError, match="no such config file"):
        config.load(str(tmp_path / "nope.toml"), required=True)


def test_cli_reports_a_bad_config_in_one_line_and_options_override(tmp_path):
    bad = write(tmp_path, "[detector]\nenter_intervals = 0\n")
    proc = subprocess.run([sys.executable, "-m", "gpudisk_top", "--once", "--demo", "--config", bad],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and "line 2" in proc.stderr
    good = write(tmp_path, "[detector]\ngpu_low_util_pct = 99.5\n")
    env = dict(os.environ, XDG_CONFIG_HOME=str(tmp_path / "none"))
    base = [sys.executable, "-m", "gpudisk_top", "--once", "--json", "--demo"]
    states = {}
    for extra in ([], ["--config", good], ["--config", good, "--gpu-low-pct", "50"]):
        out = subprocess.run(base + extra, capture_output=True, text=True, env=env)
        assert out.returncode == 0, out.stderr
        states[tuple(extra)] = json.loads(out.stdout)["verdict"]["state"]
    # the demo's GPUs run at about 96 %: under a 99.5 % threshold they count as starved
    assert states[()] == "healthy"
    assert states[("--config", good)] != "healthy"
    assert states[("--config", good, "--gpu-low-pct", "50")] == "healthy"
