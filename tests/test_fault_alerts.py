"""Fault round (issue 9, item 2): alert actions act on exactly the processes concerned,
never on simulated PIDs, never drop a command because others run, keep the umask, and
say a repeated problem once a minute."""

from __future__ import annotations

import json
import os
import stat
import sys

import pytest

from model_factory import gpu, model
from test_alerts import disk_rule, engine, wait_for

RECORD_ARGV = (sys.executable, "-c",
               "import os, sys; open(sys.argv[1], 'a').write(os.environ['GDT_ALERT_DEVICE'] + chr(10))")


def many_disks(n: int, util: float) -> dict[str, float]:
    return {f"nvme{i}n1": util for i in range(n)}


# RECORD_ARGV after a second: none has ended when the test counts those running and waiting
SLOW_RECORD_ARGV = (sys.executable, "-c",
                    "import os, sys, time; time.sleep(1); "
                    "open(sys.argv[1], 'a').write(os.environ['GDT_ALERT_DEVICE'] + chr(10))")


def test_sixteen_devices_firing_together_run_sixteen_commands(tmp_path):
    out = tmp_path / "ran"
    rule = disk_rule(for_samples=1, command=(*SLOW_RECORD_ARGV, str(out)))
    eng, warns = engine(rule)
    fired = eng.update(model(1, many_disks(16, 99.0)))
    assert len(fired) == 16
    assert eng.commands.running + eng.commands.waiting == 16
    assert eng.commands.running <= 8                     # at most MAX_RUNNING at once
    assert wait_for(lambda: (eng.commands.poll(), out.exists()
                             and len(out.read_text().split()) == 16)[1], 30)
    assert sorted(out.read_text().split()) == sorted(many_disks(16, 0))
    eng.close()
    assert warns == []


def test_a_command_that_could_not_start_yet_is_not_lost_to_the_cooldown(tmp_path):
    """Commands wait for a free slot rather than being dropped and then held back by a
    300 s cooldown (the old runner ran 3 of 16 and never the rest)."""
    out = tmp_path / "ran"
    slow = (sys.executable, "-c", "import time; time.sleep(0.5)")
    busy = disk_rule(name="busy", devices=("sd*",), for_samples=1, command=slow)
    rule = disk_rule(for_samples=1, command=(*RECORD_ARGV, str(out)))
    eng, warns = engine(busy, rule)
    eng.commands.max_running = 2
    disks = {**many_disks(4, 99.0), "sda": 99.0, "sdb": 99.0}
    eng.update(model(1, disks))
    assert eng.commands.waiting == 4                       # 2 slow ones hold both slots
    assert wait_for(lambda: (eng.commands.poll(), out.exists()
                             and len(out.read_text().split()) == 4)[1], 30)
    eng.close()


def test_commands_still_waiting_at_exit_are_named(tmp_path):
    """At exit the queue is not run; the warning says how many, and for which devices."""
    slow = (sys.executable, "-c", "import time; time.sleep(30)")
    eng, warns = engine(disk_rule(for_samples=1, timeout_s=60, command=slow))
    eng.commands.max_running = 2
    eng.update(model(1, many_disks(9, 99.0)))
    assert eng.commands.running == 2 and eng.commands.waiting == 7
    eng.close(wait_s=0.1)
    waited = [w for w in warns if "still waiting at exit" in w]
    never_run = sorted(many_disks(9, 0))[2:]               # the first two started
    assert waited == ["alert disk-busy: 7 commands still waiting at exit were not run "
                      f"(for {', '.join(never_run[:5])} and 2 more)"]


def test_verdict_rule_signals_only_the_verdicts_job(tmp_path):
    from model_factory import verdict

    out = tmp_path / "pids.json"
    argv = (sys.executable, "-c", "import json, sys; json.dump(sys.argv[2:], open(sys.argv[1], 'w'))",
            str(out), "{pids}")
    from gpudisk_top.alerts import AlertRule

    rule = AlertRule(name="starving", kind="verdict", states=("disk-starved",), for_samples=1,
                     cooldown_s=0.0, log=None, command=argv)
    eng, warns = engine(rule)
    m = model(1, gpus=[gpu(0, pids=[11]), gpu(1, pids=[22])])
    eng.update(m, verdict("disk-starved", processes=[22]))
    eng.close()
    assert json.loads(out.read_text()) == ["22"]
    # a verdict naming no process: nobody, not every GPU process
    out.unlink()
    eng, warns = engine(rule)
    eng.update(m, verdict("disk-starved", processes=[]))
    eng.close()
    assert not out.exists()
    assert warns == ["alert starving: no GPU process of the verdict's job to give its "
                     "command; not run"]


def test_simulated_data_runs_nothing_real(tmp_path):
    out = tmp_path / "ran"
    touch = tmp_path / "PAUSE"
    log = tmp_path / "alerts.log"
    rule = disk_rule(for_samples=1, command=(*RECORD_ARGV, str(out)), touch=str(touch),
                     log=str(log))
    eng, warns = engine(rule, source="simulated, scenario demo, seed 0")
    eng.update(model(1, {"nvme0n1": 99.0}, gpus=[gpu(0, pids=[os.getpid()])],
                     proc_devices={os.getpid(): ("nvme0n1p1",)}))
    eng.close()
    assert not out.exists() and not touch.exists() and not log.exists()
    assert warns == ["alerts on simulated data (--demo) run no command and write no touch "
                     "or log file; --demo-actions runs them"]
    # asked for: the actions run, but never with a PID (a simulated PID names nobody here)
    argv = (sys.executable, "-c", "import json, sys; json.dump(sys.argv[2:], open(sys.argv[1], 'w'))",
            str(out), "{name}")
    eng, warns = engine(disk_rule(for_samples=1, command=argv, touch=str(touch)),
                        source="simulated, scenario demo, seed 0", demo_actions=True)
    eng.update(model(1, {"nvme0n1": 99.0}, gpus=[gpu(0, pids=[os.getpid()])],
                     proc_devices={os.getpid(): ("nvme0n1p1",)}))
    eng.close()
    assert json.loads(out.read_text()) == ["disk-busy"]
    assert json.loads(touch.read_text())["pids"] == ""


def test_touch_and_log_files_follow_the_umask(tmp_path):
    touch = tmp_path / "PAUSE"
    log = tmp_path / "alerts.log"
    old = os.umask(0o077)
    try:
        eng, warns = engine(disk_rule(for_samples=1, touch=str(touch), log=str(log)))
        eng.update(model(1, {"nvme0n1": 99.0}))
        eng.close()
    finally:
        os.umask(old)
    assert warns == []
    assert stat.S_IMODE(os.stat(touch).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(log).st_mode) == 0o600


@pytest.mark.root(reason="making a link owned by another user needs root")
def test_a_touch_path_that_is_another_users_link_is_not_followed(tmp_path):
    victim = tmp_path / "shadow"
    victim.write_text("root:x:0\n")
    link = tmp_path / "PAUSE"
    os.symlink(victim, link)
    os.lchown(link, 65534, 65534)
    eng, warns = engine(disk_rule(for_samples=1, touch=str(link)))
    eng.update(model(1, {"nvme0n1": 99.0}))
    eng.close()
    assert victim.read_text() == "root:x:0\n" and os.path.islink(link)
    assert len(warns) == 1 and "owned by another user" in warns[0]


def test_repeated_problems_are_said_once_a_minute():
    """Four rules whose commands cannot run, firing every sample for 5 s: four lines,
    not a hundred (the old engine printed 106)."""
    rules = [disk_rule(name=f"r{i}", for_samples=1, cooldown_s=0.0,
                       command=(f"/nonexistent/notify-{i}",)) for i in range(4)]
    eng, warns = engine(*rules)
    for k in range(100):
        high = 99.0 if k % 2 == 0 else 10.0      # a new hold every other sample
        eng.update(model(k + 1, {"nvme0n1": high}))
    before_close = list(warns)
    eng.close()
    assert len(before_close) == 4, before_close
    assert all("cannot run /nonexistent/notify-" in w for w in before_close)
    # at exit, what was held back is said once more per rule, with its count
    held = warns[4:]
    assert len(held) == 4 and all("(49 like it since the last said)" in w for w in held), held
