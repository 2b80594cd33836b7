"""Alert rules end to end: conditions held for N samples, cooldowns, and real actions (a
command run as an argv process, a file written, a signal to a "training" process)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time


from model_factory import gpu, model, verdict
from gpudisk_top.alerts import AlertEngine, AlertRule
from gpudisk_top.verdict.detect import STARVED_STATES, Detector
from gpudisk_top.model.snapshot import Model
from gpudisk_top.sim import Simulator, builtin
from gpudisk_top.watch import FreeSpace

GB = 1000**3

# a command that appends its GDT_ALERT_* environment, as one JSON line, to $OUT
RECORD = [sys.executable, "-c",
          "import json, os\n"
          "env = {k: v for k, v in os.environ.items() if k.startswith('GDT_ALERT_')}\n"
          "open(os.environ['OUT'], 'a').write(json.dumps(env) + '\\n')\n"]


def disk_rule(**kw) -> AlertRule:
    base = dict(name="disk-busy", kind="metric", metric="disk_util_pct", op=">", value=90.0,
                devices=("nvme*",), for_samples=3, cooldown_s=300.0, log=None)
    base.update(kw)
    return AlertRule(**base)


class Warnings(list):
    def __call__(self, line):
        self.append(line)


def engine(*rules, **kw):
    warns = Warnings()
    kw.setdefault("stderr", None)
    return AlertEngine(rules, warn=warns, host_name="node-17", **kw), warns


def read_lines(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def wait_for(predicate, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


# ---------------------------------------------------------------------------- holds
def test_fires_once_when_held_for_n_samples_and_not_again_while_held():
    eng, warns = engine(disk_rule())
    fired = [eng.update(model(i, {"nvme0n1": 97.0})) for i in range(1, 10)]
    assert [len(f) for f in fired] == [0, 0, 1, 0, 0, 0, 0, 0, 0]
    alert = fired[2][0]
    assert alert.rule == "disk-busy" and alert.subject == "nvme0n1" and alert.samples == 3
    assert alert.message == ("disk-busy: nvme0n1 (/checkpoints) disk_util_pct 97 > 90 "
                             "for 3 samples")
    assert "\n" not in alert.message and alert.banner and not alert.bell
    assert [a.rule for a in eng.active()] == ["disk-busy"]
    eng.update(model(10, {"nvme0n1": 10.0}))
    assert eng.active() == [] and warns == []


def test_a_dip_restarts_the_count():
    eng, _ = engine(disk_rule())
    utils = [97, 97, 50, 97, 97, 97]
    fired = [eng.update(model(i, {"nvme0n1": u})) for i, u in enumerate(utils, 1)]
    assert [len(f) for f in fired] == [0, 0, 0, 0, 0, 1]


def test_cooldown_holds_then_a_hold_still_true_fires_when_it_ends():
    eng, _ = engine(disk_rule(cooldown_s=10.0))
    util = {i: 97.0 for i in range(1, 4)}          # hold 1: samples 1-3 -> fires at 3
    util.update({i: 97.0 for i in range(5, 16)})    # hold 2: from 5, >= 3 samples at 7
    out = {i: eng.update(model(i, {"nvme0n1": util.get(i, 10.0)})) for i in range(1, 17)}
    fired_at = [i for i, f in out.items() if f]
    # hold 2 reaches 3 samples at 7, inside the 10 s cooldown (3 + 10 = 13): it fires at 13
    assert fired_at == [3, 13]


def test_cooldown_suppresses_a_hold_that_ends_inside_it():
    eng, _ = engine(disk_rule(cooldown_s=10.0))
    util = {1: 97, 2: 97, 3: 97, 5: 97, 6: 97, 7: 97, 8: 97, 20: 97, 21: 97, 22: 97}
    out = {i: eng.update(model(i, {"nvme0n1": util.get(i, 1.0)})) for i in range(1, 23)}
    assert [i for i, f in out.items() if f] == [3, 22]


def test_each_device_is_its_own_subject_and_globs_skip_partitions():
    rule = disk_rule(devices=("*",), for_samples=1)
    eng, _ = engine(rule)
    fired = eng.update(model(1, {"nvme0n1": 95, "nvme0n1p1": 95, "sda": 99, "dm-0": 10}))
    assert sorted(a.subject for a in fired) == ["nvme0n1", "sda"]
    # a partition is watched when named exactly; a dm device by its /dev/mapper name
    eng, _ = engine(disk_rule(devices=("nvme0n1p1", "vg-*"), for_samples=1))
    fired = eng.update(model(1, {"nvme0n1p1": 95, "dm-0": 95, "sda": 99}))
    assert sorted(a.subject for a in fired) == ["dm-0", "nvme0n1p1"]


def test_mountpoint_selector_and_the_first_sample_without_rates():
    eng, _ = engine(disk_rule(devices=(), mountpoints=("/datasets",), for_samples=1))
    first = model(1, {"sda": 99})
    first.interval_s = 0.0   # the first Model has no rates: nothing is judged
    assert eng.update(first) == []
    assert [a.subject for a in eng.update(model(2, {"sda": 99}))] == ["sda"]


def test_gpu_and_host_metrics():
    low = AlertRule(name="gpu-low", kind="metric", metric="gpu_util_pct", op="<", value=50.0,
                    gpus=(1,), log=None)
    psi = AlertRule(name="io-pressure", kind="metric", metric="host_psi_io_some_pct", op=">=",
                    value=1.5, log=None)
    eng, _ = engine(low, psi)
    fired = eng.update(model(1, gpus=[gpu(0, 10.0, pids=[11]), gpu(1, 20.0, pids=[12])]))
    by_rule = {a.rule: a for a in fired}
    assert by_rule["gpu-low"].subject == "1" and by_rule["gpu-low"].env["GDT_ALERT_PID"] == "12"
    assert by_rule["io-pressure"].subject == "" and by_rule["io-pressure"].value == 1.5
    assert by_rule["io-pressure"].message == "io-pressure: host host_psi_io_some_pct 1.5 >= 1.5 for 1 sample"


def test_n_a_values_never_hold():
    rule = AlertRule(name="hot", kind="metric", metric="gpu_temp_c", op=">", value=80.0, log=None)
    eng, _ = engine(rule)
    assert eng.update(model(1, gpus=[gpu(0, temp_c=None)])) == []


def test_verdict_rule_with_crafted_verdicts():
    rule = AlertRule(name="starving", kind="verdict", states=("disk-starved", "cpu-starved"),
                     for_samples=2, cooldown_s=0.0, log=None)
    eng, _ = engine(rule)
    states = ["healthy", "disk-starved", "disk-starved", "cpu-starved", "healthy",
              "cpu-starved", "cpu-starved"]
    fired = [eng.update(model(i), verdict(s, reason="GPU 0-7 at 40% for 9 s"))
             for i, s in enumerate(states, 1)]
    assert [len(f) for f in fired] == [0, 0, 1, 0, 0, 0, 1]
    assert fired[2][0].message == "starving: disk-starved for 2 samples: GPU 0-7 at 40% for 9 s"
    assert fired[2][0].env["GDT_ALERT_STATE"] == "disk-starved"


def test_verdict_rule_fires_when_the_detector_opens_an_episode():
    """Driven by the simulator through the real detector: `verdict = "starved"` fires once
    per episode, at the sample where the detector opens it."""
    rule = AlertRule(name="starving", kind="verdict", states=tuple(sorted(STARVED_STATES)),
                     cooldown_s=0.0, log=None)
    eng, _ = engine(rule)
    sim = Simulator(builtin("disk-starved-sata"), seed=3)
    det, last = Detector(), None
    fired_at, opened_at = [], []
    seen = set()
    for i in range(len(sim.labels())):
        sample = sim.sample()
        m = Model.new(sample, last)
        v = det.feed(m)
        last = sample
        if v.episode is not None and v.episode.id not in seen:
            seen.add(v.episode.id)
            opened_at.append(i)
        if eng.update(m, v):
            fired_at.append(i)
    assert opened_at, "the scenario has a disk-starved episode"
    assert fired_at == opened_at


def test_disk_rule_on_the_simulated_demo_node():
    """The demo's dataset disk (sdb) goes to 100 % in its disk-starved phase."""
    rule = disk_rule(devices=("sdb",), cooldown_s=3600.0)
    eng, _ = engine(rule)
    sim = Simulator(builtin("demo"), seed=0)
    last, fired = None, []
    for i in range(200):
        sample = sim.sample()
        m = Model.new(sample, last)
        last = sample
        for a in eng.update(m):
            fired.append((i, a, sim.label_at(i)))
    assert len(fired) == 1
    i, alert, label = fired[0]
    assert alert.subject == "sdb" and label == "disk-starved" and alert.value > 90


def test_free_space_rule():
    rule = AlertRule(name="ckpt-space", kind="free_space", free_space="/checkpoints",
                     below_gb=10.0, log=None)
    eng, _ = engine(rule)
    assert eng.paths == ("/checkpoints",)
    plenty = FreeSpace("/checkpoints", size_bytes=4000 * GB, avail_bytes=800 * GB,
                       free_bytes=900 * GB, dev_major=259, dev_minor=1)
    low = FreeSpace("/checkpoints", size_bytes=4000 * GB, avail_bytes=int(8.2 * GB),
                    free_bytes=int(9 * GB), dev_major=259, dev_minor=1)
    hung = FreeSpace("/checkpoints", error="no answer for 3 s (a hung mount?)")
    assert eng.update(model(1), free_space=[plenty]) == []
    assert eng.update(model(2), free_space=[hung]) == []
    (alert,) = eng.update(model(3), free_space=[low])
    assert alert.message == ("ckpt-space: /checkpoints has 8.2 GB free of 4000.0 GB "
                             "(below 10 GB) for 1 sample")
    assert alert.env["GDT_ALERT_PATH"] == "/checkpoints"
    assert alert.env["GDT_ALERT_DEVICE"] == "nvme0n1p1" and alert.env["GDT_ALERT_VALUE"] == "8.20"
    pct = AlertRule(name="pct", kind="free_space", free_space="/checkpoints", below_pct=25.0,
                    log=None)
    eng, _ = engine(pct)
    assert len(eng.update(model(1), free_space=[plenty])) == 1   # 800 of 3900 usable: 20.5 %


# ---------------------------------------------------------------------------- actions
def test_command_runs_once_as_argv_with_the_alert_in_its_environment(tmp_path):
    out = tmp_path / "fired.jsonl"
    os.environ["OUT"] = str(out)
    try:
        eng, warns = engine(disk_rule(command=tuple(RECORD), cooldown_s=5.0))
        for i in range(1, 8):      # held 7 samples: fires at 3; the cooldown (5 s) ends at 8
            eng.update(model(i, {"nvme0n1": 97.0}, gpus=[gpu(0, pids=[4242])],
                             proc_devices={4242: ("nvme0n1p1",)}))
        eng.close()
    finally:
        del os.environ["OUT"]
    runs = read_lines(out)
    assert len(runs) == 1, runs
    env = runs[0]
    assert env["GDT_ALERT_NAME"] == "disk-busy" and env["GDT_ALERT_KIND"] == "metric"
    assert env["GDT_ALERT_METRIC"] == "disk_util_pct" and env["GDT_ALERT_VALUE"] == "97"
    assert env["GDT_ALERT_THRESHOLD"] == "90" and env["GDT_ALERT_OP"] == ">"
    assert env["GDT_ALERT_DEVICE"] == "nvme0n1" and env["GDT_ALERT_MOUNTPOINT"] == "/checkpoints"
    assert env["GDT_ALERT_PIDS"] == "4242" and env["GDT_ALERT_PID"] == "4242"
    assert env["GDT_ALERT_SAMPLES"] == "3" and env["GDT_ALERT_HOST"] == "node-17"
    assert env["GDT_ALERT_TIME"].startswith("20") and "T" in env["GDT_ALERT_TIME"]
    assert env["GDT_ALERT_MESSAGE"].startswith("disk-busy: nvme0n1")
    assert warns == []


def test_placeholders_are_substituted_without_a_shell(tmp_path):
    out = tmp_path / "argv.json"
    argv = (sys.executable, "-c", "import json, sys; json.dump(sys.argv[1:], open(sys.argv[1], 'w'))",
            str(out), "{name}", "{device}", "{value}", "{pids}", "$(touch /tmp/pwned) {subject};")
    eng, warns = engine(disk_rule(for_samples=1, command=argv))
    eng.update(model(1, {"nvme0n1": 99.5}, gpus=[gpu(0, pids=[7]), gpu(1, pids=[8])],
                     proc_devices={7: ("nvme0n1p1",), 8: ("sda",)}))
    eng.close()
    args = json.loads(out.read_text())
    # only the process with files on nvme0n1 is named, never the one on sda
    assert args == [str(out), "disk-busy", "nvme0n1", "99.5", "7",
                    "$(touch /tmp/pwned) nvme0n1;"]
    assert warns == []


def test_a_device_rule_never_widens_to_processes_that_do_not_use_the_device(tmp_path):
    """The manual's `kill -USR1 {pids}` (docs/prometheus.md) on a disk rule: when no GPU
    process reads the busy device, nobody is signalled (the old fallback named every job on
    the node)."""
    out = tmp_path / "argv.json"
    argv = (sys.executable, "-c", "import json, sys; json.dump(sys.argv[1:], open(sys.argv[1], 'w'))",
            str(out), "{pids}")
    eng, warns = engine(disk_rule(for_samples=1, command=argv))
    eng.update(model(1, {"nvme0n1": 99.5}, gpus=[gpu(0, pids=[7]), gpu(1, pids=[8])],
                     proc_devices={7: ("sda",), 8: ("sda",)}))
    eng.close()
    assert not out.exists() and eng.commands.started == 0
    assert warns == ["alert disk-busy: no GPU process with files on nvme0n1 to give its "
                     "command; not run"]


def test_pause_training_with_a_signal_to_the_gpu_process(tmp_path):
    """The manual's "pause training safely" (docs/prometheus.md): free space of the
    checkpoint volume under 10 GB sends SIGUSR1 to the GPU process, whose handler
    checkpoints and pauses."""
    flag = tmp_path / "paused"
    trainer = subprocess.Popen([sys.executable, "-c",
                                "import signal, sys, time\n"
                                "def pause(sig, frame):\n"
                                f"    open({str(flag)!r}, 'w').write('paused')\n"
                                "    sys.exit(0)\n"
                                "signal.signal(signal.SIGUSR1, pause)\n"
                                "print('ready', flush=True)\n"
                                "time.sleep(60)\n"], stdout=subprocess.PIPE, text=True)
    try:
        assert trainer.stdout.readline().strip() == "ready"
        rule = AlertRule(name="ckpt-space", kind="free_space", free_space="/checkpoints",
                         below_gb=10.0, log=None, command=("kill", "-USR1", "{pid}"),
                         touch=str(tmp_path / "PAUSE"))
        eng, warns = engine(rule)
        low = FreeSpace("/checkpoints", size_bytes=100 * GB, avail_bytes=5 * GB,
                        free_bytes=6 * GB)
        fired = eng.update(model(1, gpus=[gpu(0, pids=[trainer.pid])]), free_space=[low])
        assert len(fired) == 1
        assert trainer.wait(10) == 0
        eng.close()
        assert flag.read_text() == "paused"
        details = json.loads((tmp_path / "PAUSE").read_text())
        assert details["name"] == "ckpt-space" and details["pid"] == str(trainer.pid)
        assert details["path"] == "/checkpoints" and warns == []
    finally:
        if trainer.poll() is None:
            trainer.kill()
            trainer.wait()


def test_a_pid_command_without_a_gpu_process_is_not_run(tmp_path):
    rule = disk_rule(for_samples=1, command=("kill", "-USR1", "{pids}"))
    eng, warns = engine(rule)
    eng.update(model(1, {"nvme0n1": 99}, gpus=[gpu(0)]))
    assert eng.commands.started == 0
    assert warns == ["alert disk-busy: no GPU process with files on nvme0n1 to give its "
                     "command; not run"]


def test_failing_missing_and_slow_commands_are_warnings(tmp_path):
    fail = disk_rule(name="fail", for_samples=1, command=(sys.executable, "-c", "raise SystemExit(3)"))
    missing = disk_rule(name="missing", for_samples=1, command=("/nonexistent/notify",))
    slow = disk_rule(name="slow", for_samples=1, timeout_s=0.3,
                     command=(sys.executable, "-c", "import time; time.sleep(30)"))
    eng, warns = engine(fail, missing, slow)
    eng.update(model(1, {"nvme0n1": 99}))
    # a command that cannot start is said at once; one that fails may already have ended
    # (and been said) by the time update() returns: that is timing, not behaviour
    assert warns[0] == "alert missing: cannot run /nonexistent/notify: No such file or directory"
    assert wait_for(lambda: (eng.commands.poll(), len(warns) >= 3)[1])
    exe = os.path.basename(sys.executable)
    assert sorted(warns[1:]) == [f"alert fail: command {exe} exited with status 3",
                                 f"alert slow: command {exe} killed after 0.3 s"]
    eng.close()


def test_a_rule_does_not_pile_up_commands():
    rule = disk_rule(for_samples=1, cooldown_s=0.0,
                     command=(sys.executable, "-c", "import time; time.sleep(30)"))
    eng, warns = engine(rule)
    eng.update(model(1, {"nvme0n1": 99}))
    eng.update(model(2, {"nvme0n1": 10}))
    eng.update(model(3, {"nvme0n1": 99}))          # fires again (no cooldown)
    assert eng.commands.started == 1 and eng.commands.waiting == 1
    assert warns and "still runs; this one starts when it ends" in warns[0]
    eng.update(model(4, {"nvme0n1": 10}))
    eng.update(model(5, {"nvme0n1": 99}))          # a third: it replaces the one waiting
    assert eng.commands.started == 1 and eng.commands.waiting == 1
    eng.close(wait_s=0.1)


def test_log_lines_to_stderr_and_to_a_file(tmp_path):
    stream = io.StringIO()
    log_file = tmp_path / "alerts.log"
    eng, warns = engine(disk_rule(for_samples=1, log="stderr"),
                        disk_rule(name="to-file", for_samples=1, log=str(log_file)),
                        disk_rule(name="quiet", for_samples=1, log=None), stderr=stream)
    eng.update(model(1, {"nvme0n1": 99}))
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1
    assert lines[0].endswith(" gpudisk-top alert disk-busy: nvme0n1 (/checkpoints) "
                             "disk_util_pct 99 > 90 for 1 sample")
    assert lines[0][:4] == "2026" and "T" in lines[0].split()[0]
    eng.close()          # files are written off the sampling thread; close waits for them
    assert log_file.read_text().count("\n") == 1 and "to-file:" in log_file.read_text()
    bad = disk_rule(name="bad-log", for_samples=1, log=str(tmp_path / "no" / "dir.log"))
    eng, warns = engine(bad)
    eng.update(model(1, {"nvme0n1": 99}))
    eng.close()
    assert warns == [f"alert bad-log: cannot write {tmp_path}/no/dir.log: No such file or directory"]


def test_bell_and_banner_reach_the_dashboard():
    eng, _ = engine(disk_rule(for_samples=1, bell=True, banner=False))
    (alert,) = eng.update(model(1, {"nvme0n1": 99}))
    assert alert.bell and not alert.banner


def test_no_rules_cost_nothing():
    eng, _ = engine()
    assert eng.update(model(1, {"nvme0n1": 99})) == [] and eng.paths == ()
