"""[[alerts]], [devices."NAME"] and [watch] in the config file: what they parse into, and
bad entries as one-line errors naming the line of the offending key."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from gpudisk_top import config
from gpudisk_top.alerts import AlertRule
from gpudisk_top.config import entry_line
from gpudisk_top.exporter.labels import DeviceLabels
from gpudisk_top.watch import WatchConfig, watched_paths

GOOD = """\
[detector]
enter_intervals = 3

[watch]
paths = ["/checkpoints", "/datasets/cache/"]

[devices."nvme0n1"]
purpose = "checkpoints"
group = "worker-group-a"

[devices."sd*"]
purpose = "training_data"

[devices.sdb]
purpose = "dataset-cache"

# disk utilization above 90 % for 3 samples
[[alerts]]
name = "disk-busy"
metric = "disk_util_pct"
device = "nvme*"
op = ">"
value = 90
for_samples = 3
cooldown_s = 300
bell = true

# free space of the checkpoint directory under 10 GB: pause training safely
[[alerts]]
name = "checkpoint-space"
free_space = "/checkpoints"
below_gb = 10
touch = "/checkpoints/PAUSE"
command = ["kill", "-USR1", "{pids}"]
log = "/var/log/gpudisk-top-alerts.log"

# a starvation episode starting
[[alerts]]
name = "starving"
verdict = "starved"
cooldown_s = 0
"""


def write(tmp_path, text):
    path = tmp_path / "config.toml"
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_the_readme_example_parses(tmp_path):
    cfg = config.load(write(tmp_path, GOOD))
    rules = cfg.sections["alerts"]
    assert [r.name for r in rules] == ["disk-busy", "checkpoint-space", "starving"]
    busy, space, starving = rules
    assert busy == AlertRule(name="disk-busy", kind="metric", metric="disk_util_pct", op=">",
                             value=90.0, devices=("nvme*",), for_samples=3, cooldown_s=300.0,
                             bell=True, line=18)
    assert space.kind == "free_space" and space.below_gb == 10.0 and space.below_pct is None
    assert space.command == ("kill", "-USR1", "{pids}") and space.touch == "/checkpoints/PAUSE"
    assert space.log == "/var/log/gpudisk-top-alerts.log" and space.for_samples == 1
    assert starving.kind == "verdict" and "disk-starved" in starving.states
    assert "healthy" not in starving.states and starving.cooldown_s == 0
    assert cfg.sections["watch"] == WatchConfig(paths=("/checkpoints", "/datasets/cache"))
    assert watched_paths(cfg.sections) == ("/checkpoints", "/datasets/cache")
    labels = cfg.sections["devices"]
    assert labels.names == ("group", "purpose")
    assert labels.for_device("nvme0n1") == {"purpose": "checkpoints", "group": "worker-group-a"}
    assert labels.for_device("sda") == {"purpose": "training_data"}
    assert labels.for_device("sdb") == {"purpose": "dataset-cache"}   # exact beats glob
    assert labels.for_device("vda") == {}
    assert cfg.thresholds.enter_intervals == 3


def test_absent_sections_are_empty(tmp_path):
    cfg = config.load(write(tmp_path, "[detector]\n"))
    assert cfg.sections["alerts"] == () and cfg.sections["watch"] == WatchConfig()
    assert cfg.sections["devices"] == DeviceLabels()
    assert config.load(str(tmp_path / "absent.toml")).sections["alerts"] == ()


def test_free_space_rules_add_their_path_to_the_watch(tmp_path):
    cfg = config.load(write(tmp_path, """\
        [[alerts]]
        name = "scratch"
        free_space = "/scratch/"
        below_pct = 5
        """))
    assert watched_paths(cfg.sections) == ("/scratch",)


def test_mapper_names_and_dev_prefixes_match():
    labels = DeviceLabels((("vg-data", (("purpose", "data"),)),
                           ("/dev/nvme*", (("tier", "fast"),))))
    assert labels.for_device("dm-0", "vg-data") == {"purpose": "data"}
    assert labels.for_device("nvme3n1", "nvme3n1") == {"tier": "fast"}


ENTRY = '[[alerts]]\nname = "ok"\nmetric = "disk_util_pct"\nop = ">"\nvalue = 1\n\n'


@pytest.mark.parametrize("text, line, words", [
    # the second entry's bad key is named, not the first entry's
    (ENTRY + '[[alerts]]\nname = "b"\nmetric = "disk_util_pct"\nop = "=>"\nvalue = 1\n',
     10, "op must be one of > >= < <= == !="),
    (ENTRY + '[[alerts]]\nname = "b"\nmetric = "disk_utl_pct"\nop = ">"\nvalue = 1\n',
     9, "unknown metric 'disk_utl_pct'"),
    (ENTRY + '[[alerts]]\nname = "b"\nfor_samples = 3\n', 7, "give exactly one condition"),
    (ENTRY + '[[alerts]]\nname = "b"\nverdict = "disk-starved"\nfree_space = "/x"\n', 10,
     "give exactly one condition"),
    (ENTRY + '[[alerts]]\nname = "ok"\nverdict = "starved"\n', 8, "a second rule is named 'ok'"),
    ('[[alerts]]\nname = "b"\nverdict = "disk-starvd"\n', 3, "unknown state 'disk-starvd'"),
    ('[[alerts]]\nname = "b"\nverdict = "starved"\nfor_samples = 0\n', 4, "for_samples must be"),
    ('[[alerts]]\nname = "b"\nverdict = "starved"\ncooldown_s = -1\n', 4, "cooldown_s must be"),
    ('[[alerts]]\nname = "b"\nverdict = "starved"\nvalue = 3\n', 4,
     "'value' does not go with a verdict condition"),
    ('[[alerts]]\nname = "b"\nverdict = "starved"\nsevrity = 3\n', 4, "unknown setting 'sevrity'"),
    ('[[alerts]]\nname = "b"\nverdict = "starved"\ncommand = "kill -USR1 1"\n', 4,
     "command must be a list of arguments, run without a shell"),
    ('[[alerts]]\nname = "b"\nverdict = "starved"\ncommand = ["kill", "{pdi}"]\n', 4,
     "unknown placeholder {pdi}"),
    ('[[alerts]]\nname = "b"\nverdict = "starved"\ncommand = ["kill", "-9 {pids}"]\n', 4,
     "{pids} must be an argument of its own"),
    ('[[alerts]]\nname = "b"\nverdict = "starved"\nlog = "alerts.log"\n', 4,
     'log must be "stderr", an absolute file path, or false'),
    ('[[alerts]]\nname = "b"\nverdict = "starved"\ntouch = "PAUSE"\n', 4,
     "touch must be an absolute file path"),
    ('[[alerts]]\nname = "b"\nfree_space = "/ckpt"\n', 3, "say when: below_gb"),
    ('[[alerts]]\nname = "b"\nfree_space = "/ckpt"\nbelow_gb = "10"\n', 4,
     "below_gb must be a number above 0"),
    ('[[alerts]]\nname = "b"\nfree_space = "ckpt"\nbelow_gb = 1\n', 3, "absolute path"),
    ('[[alerts]]\nname = "b"\nmetric = "gpu_util_pct"\nop = "<"\nvalue = 5\ndevice = "sda"\n',
     6, "device selects disks; gpu_util_pct is not a disk metric"),
    ('[[alerts]]\nname = "b"\nmetric = "gpu_util_pct"\nop = "<"\nvalue = 5\ngpu = "0"\n',
     6, "gpu must be a GPU index"),
    ('[[alerts]]\nname = "b"\nmetric = "gpu_util_pct"\nop = "<"\nvalue = "5"\n',
     5, "value must be a number"),
    ('[[alerts]]\nmetric = "gpu_util_pct"\nop = "<"\nvalue = 5\n', 1, "every rule needs a name"),
    ('[[alerts]]\nname = "has space"\nverdict = "starved"\n', 2, "every rule needs a name"),
    ('[alerts]\nname = "b"\n', 1, "alerts must be an array of tables"),
    # [devices."NAME"]
    ('[devices."nvme0n1"]\npurpose = "x"\n2bad = "y"\n', 3, "'2bad' is not a Prometheus label name"),
    ('[devices.nvme0n1]\npurpose = "x"\ndevice = "y"\n', 3, "label 'device' is set by gpudisk-top"),
    ("[devices.'sda']\npurpose = 3\n", 2, "devices.sda.purpose must be a string"),
    ('[devices]\npurpose = "x"\n', 2, "devices.purpose must be a table of labels"),
    ('[devices."sda"]\n', 1, "devices.sda has no labels"),
    # [watch]
    ('[watch]\npaths = ["checkpoints"]\n', 2, "'checkpoints' is not an absolute path"),
    ('[watch]\npaths = "/checkpoints"\n', 2, "watch.paths must be a list of paths"),
    ('[watch]\npath = ["/x"]\n', 2, "unknown setting watch.path"),
])
def test_bad_entries_name_the_line(tmp_path, text, line, words):
    path = write(tmp_path, text)
    with pytest.raises(config.ConfigError) as err:
        config.load(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}: line {line}: "), msg
    assert words in msg and "\n" not in msg


def test_entry_line_finds_the_nth_entry():
    text = ENTRY + "[detector]\nenter_intervals = 3\n" + ENTRY
    assert entry_line(text, "alerts", 0, "op") == 4
    assert entry_line(text, "alerts", 1, "op") == 12
    assert entry_line(text, "alerts", 1, "cooldown_s") == 9    # absent: the entry's header
    assert entry_line(text, "alerts", 2, None) is None


def test_serve_reports_a_bad_config_in_one_line(tmp_path):
    path = write(tmp_path, ENTRY + '[[alerts]]\nname = "b"\nmetric = "disk_util_pct"\n'
                                   'op = ">"\nvalue = "ninety"\n')
    code = ("import sys; from gpudisk_top.cli import main; "
            "sys.argv[0] = 'gpudisk-top'; from gpudisk_top.commands import serve; "
            "from gpudisk_top.errors import UsageError\n"
            "try:\n"
            "    sys.exit(serve.run(serve.build_parser('gpudisk-top serve').parse_args(sys.argv[1:])))\n"
            "except UsageError as err:\n"
            "    print(f'gpudisk-top: error: {err}', file=sys.stderr); sys.exit(2)\n")
    proc = subprocess.run([sys.executable, "-c", code, "--demo", "--config", path,
                           "--listen", "127.0.0.1:0", "--count", "1"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [
        f"gpudisk-top: error: config: {path}: line 11: alerts 'b': value must be a number "
        "(the threshold, in the metric's own unit)"]
