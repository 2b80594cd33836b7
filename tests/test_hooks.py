"""SampleHooks: what the dashboard and the recorder call from their sampler thread."""

from __future__ import annotations

import argparse
import urllib.request

import pytest

from model_factory import model, verdict
from gpudisk_top.alerts import AlertRule
from gpudisk_top.errors import UsageError
from gpudisk_top.collect.source import LIVE, Source
from gpudisk_top.commands.common import add_export_options, export_options
from gpudisk_top.exporter import (DEFAULT_LISTEN, DeviceLabels, ExportOptions, SampleHooks,
                                  wants_hooks)
from gpudisk_top.watch import WatchConfig


def test_one_sample_through_watch_alerts_and_metrics(tmp_path):
    rule = AlertRule(name="space", kind="free_space", free_space=str(tmp_path),
                     below_pct=100.0, log=None, bell=True)
    sections = {"alerts": (rule,), "watch": WatchConfig(paths=("/",)),
                "devices": DeviceLabels((("sda", (("purpose", "data"),)),))}
    hooks = SampleHooks(sections, ExportOptions(listen="127.0.0.1:0"),
                        Source(LIVE, "node-17", LIVE), stderr=None).start()
    try:
        fired = hooks.on_sample(model(1), verdict("healthy"), [])
        assert [a.rule for a in fired] == ["space"] and fired[0].bell
        assert [fs.path for fs in hooks.free_space] == ["/", str(tmp_path)]
        assert all(fs.ok for fs in hooks.free_space)
        assert [a.rule for a in hooks.engine.active()] == ["space"]
        text = urllib.request.urlopen(hooks.server.url, timeout=10).read().decode()
        assert 'gpudisk_top_alerts_fired_total{alert="space"} 1.0' in text
        assert [x for x in text.splitlines()
                if x.startswith("gpudisk_top_path_up{") and f'path="{tmp_path}"' in x]
        assert 'purpose="data"' in text
        assert hooks.on_sample(model(2), verdict("healthy"), []) == []   # held: once
    finally:
        hooks.close()


def dashboard_args(*argv):
    p = argparse.ArgumentParser()
    add_export_options(p)
    return p.parse_args(list(argv))


ORIGIN = Source(LIVE, "node-17", LIVE)


def test_the_dashboard_serves_only_when_asked():
    hooks = SampleHooks({}, export_options(dashboard_args()), ORIGIN)
    assert hooks.server is None and hooks.pusher is None
    assert hooks.on_sample(model(1)) == []          # no rules: nothing, and no endpoint
    hooks.close()
    hooks = SampleHooks({}, export_options(dashboard_args("--listen", "127.0.0.1:0")), ORIGIN)
    assert hooks.server.address == ("127.0.0.1", 0)
    hooks = SampleHooks({}, export_options(dashboard_args("--push", "http://gw:9091")), ORIGIN)
    assert hooks.pusher.grouping == {"instance": "node-17"} and hooks.server.url is None
    with pytest.raises(UsageError, match="--push-interval needs --push URL"):
        export_options(dashboard_args("--push-interval", "5"))


def test_export_options_are_typed_and_checked():
    """The command line's --listen/--push become an ExportOptions in commands/; the bad
    ones are refused there, each in one line that names the option."""
    opts = export_options(dashboard_args("--push", "http://gw:9091", "--push-interval", "30",
                                         "--push-job", "train"))
    assert opts == ExportOptions(push_url="http://gw:9091", push_interval_s=30.0,
                                 push_job="train")
    assert export_options(dashboard_args()) == ExportOptions() and not ExportOptions().wanted
    with pytest.raises(UsageError, match="^--listen ':9425': give the address to bind"):
        export_options(dashboard_args("--listen", ":9425"))
    with pytest.raises(UsageError, match="^--push 'gw:9091'"):
        export_options(dashboard_args("--push", "gw:9091"))
    serve = argparse.ArgumentParser()
    add_export_options(serve, serve=True)
    assert export_options(serve.parse_args([]), serve=True).listen == DEFAULT_LISTEN
    with pytest.raises(UsageError, match="--no-listen needs --push URL"):
        export_options(serve.parse_args(["--no-listen"]), serve=True)


def test_wants_hooks_only_when_something_is_asked():
    sections = {"alerts": (), "watch": WatchConfig()}
    assert not wants_hooks(ExportOptions(), sections)
    assert wants_hooks(export_options(dashboard_args("--listen", "9425")), sections)
    assert wants_hooks(export_options(dashboard_args("--push", "http://gw:9091")), sections)
    assert wants_hooks(ExportOptions(), {"watch": WatchConfig(paths=("/x",))})
