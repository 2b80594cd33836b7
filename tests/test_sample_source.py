"""The one interface of a sample source (collect/sample_source.py): the live Sampler and
the simulator both provide every member the commands, the Feed and the dashboard call, a
source that has nothing of a member answers as SourceDefaults says, and a source returns
its notes (--delayacct's switch) instead of printing them: the command says them, in the
same words."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import time

import pytest

from gpudisk_top.collect import sampler as sampler_module
from gpudisk_top.collect.delayacct import DelayAccounting
from gpudisk_top.collect.delayacct_place import Place
from gpudisk_top.collect.ioscan import SCAN_OPEN_S
from gpudisk_top.collect.roots import Roots
from gpudisk_top.collect.sample_source import SampleSource
from gpudisk_top.collect.sampler import Sampler
from gpudisk_top.commands.common import close_source
from gpudisk_top.sim import Simulator, builtin
from gpudisk_top.sim.fake_nvml import FakeNvml
from slack import slack

# another gpudisk-top --delayacct: holds its file in the lock directory until told
HOLDER = ("import fcntl, os, sys\n"
          "fd = os.open(os.path.join(sys.argv[1], str(os.getpid())), os.O_RDWR | os.O_CREAT, 0o600)\n"
          "fcntl.flock(fd, fcntl.LOCK_EX)\n"
          "print('held', flush=True)\n"
          "sys.stdin.read()\n")


def sources():
    return [Simulator(builtin("demo"), seed=0), Sampler(Roots(), nvml=FakeNvml.with_gpus(1))]


def test_every_source_provides_the_interface():
    for source in sources():
        try:
            assert isinstance(source, SampleSource), type(source).__name__
            source.interval_s = 2.0
            assert source.interval_s == 2.0
            source.io_view = True
            source.cover_next_interval()
            assert source.sample().disks
            assert source.drain_notes() == []
        finally:
            source.close()


def test_the_simulator_answers_as_a_source_with_nothing_of_it():
    """No node to scan, no health to wait for (the wait returns at once), no notes; and
    asking changes nothing it simulates."""
    asked, plain = Simulator(builtin("demo"), seed=3), Simulator(builtin("demo"), seed=3)
    try:
        assert asked.scan_open_s is None
        t0 = time.monotonic()
        assert asked.wait_health(60.0) is True
        assert time.monotonic() - t0 < 1.0 * slack()
        asked.io_view = True
        for _ in range(3):
            asked.cover_next_interval()
            assert asked.sample() == plain.sample()
        assert asked.drain_notes() == []
    finally:
        asked.close()
        plain.close()


def test_the_live_sampler_scans_the_node_while_the_io_view_is_open():
    source = Sampler(Roots(), nvml=FakeNvml.with_gpus(1))
    try:
        assert source.scan_open_s == SCAN_OPEN_S
    finally:
        source.close()


def test_the_sampler_returns_its_delayacct_notes_and_the_command_says_them(
        tmp_path, monkeypatch, capfd):
    """--delayacct while another gpudisk-top --delayacct (a real process holding its lock
    file) still runs: the setting (a file here, not the node's sysctl) is switched on at
    start and left on at close.  The sampler prints neither line; it gives each once, and
    close_source says the closing one as the sampler said it before."""
    sysctl = tmp_path / "task_delayacct"
    sysctl.write_text("0\n")
    lock_dir = tmp_path / "run" / "lock"
    lock_dir.parent.mkdir(mode=0o700)
    lock_dir.mkdir(mode=0o700)
    monkeypatch.setattr(sampler_module, "DelayAccounting", functools.partial(
        DelayAccounting, path=str(sysctl), place=Place(str(lock_dir), "test-boot")))
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock_dir)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    left_on = ("kernel.task_delayacct is left on: gpudisk-top --delayacct "
               f"(pid {holder.pid}) still uses it")
    try:
        assert holder.stdout.readline() == "held\n"
        source = Sampler(Roots(), nvml=FakeNvml.with_gpus(1), delayacct=True)
        started = source.drain_notes()
        assert len(started) == 1 and "kernel.task_delayacct switched on" in started[0]
        assert source.drain_notes() == []          # each note given once
        assert sysctl.read_text() == "1\n"
        source.close()
        assert capfd.readouterr() == ("", "")      # nothing printed by the collector
        assert source.drain_notes() == [left_on] and sysctl.read_text() == "1\n"

        # the command's close: the same line on stderr, as the sampler printed it before
        again = Sampler(Roots(), nvml=FakeNvml.with_gpus(1), delayacct=True)
        assert "switched on by gpudisk-top" in again.drain_notes()[0]
        close_source(again)
        assert capfd.readouterr() == ("", f"gpudisk-top: {left_on}\n")
        assert again.drain_notes() == []
    finally:
        holder.stdin.close()
        holder.wait(10)
    assert not os.path.exists(lock_dir / str(os.getpid()))

