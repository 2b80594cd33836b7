"""Alert rules that name jobs on a shared node (issue 37, alerts/jobs.py): `job` and
`job_name` globs in the config file, a rule judged per job on that job's own verdict, its
command given {job_id} and {job_name} (escaped), and a rule without one judged on the node
as before.  The last test runs the real `serve` on two real processes."""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import pytest

from slack import slack
from test_alerts import engine, read_lines, wait_for
from test_alert_config import write
from test_job_metrics import end, interval, sleeper, start_serve
from gpudisk_top import config
from gpudisk_top.alerts import AlertRule


# a command that appends its arguments, as one JSON line, to $OUT
ARGV = (sys.executable, "-c", "import json, os, sys\n"
        "open(os.environ['OUT'], 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n")


def verdict_rule(**kw) -> AlertRule:
    base = dict(name="job-starving", kind="verdict", states=("disk-starved", "cpu-starved"),
                for_samples=2, cooldown_s=300.0, log=None)
    base.update(kw)
    return AlertRule(**base)


def test_job_and_job_name_parse_where_a_job_can_be_told(tmp_path):
    cfg = config.load(write(tmp_path, """\
[[alerts]]
name = "slurm-starving"
verdict = "starved"
job = "slurm:*"
job_name = ["slurm * (train.py)", "pod team-a/*"]
command = ["notify", "{job_id}", "{job_name}"]

[[alerts]]
name = "job-gpu-idle"
metric = "gpu_util_pct"
op = "<"
value = 5
job = ["pid:*", "k8s:*"]
"""))
    starving, idle = cfg.sections["alerts"]
    assert starving.jobs == ("slurm:*",) and starving.per_job
    assert starving.job_names == ("slurm * (train.py)", "pod team-a/*")
    assert starving.matches_job("slurm:1001", "slurm 1001 (train.py)")
    assert not starving.matches_job("slurm:1001", "slurm 1001 (eval.py)")
    assert not starving.matches_job("pid:1001", "pod team-a/llama-0")
    assert starving.condition().startswith("verdict starved of job slurm:*")
    assert idle.jobs == ("pid:*", "k8s:*") and idle.matches_job("k8s:0f-1", "")


@pytest.mark.parametrize("text,line,words", [
    ('[[alerts]]\nname = "b"\nmetric = "disk_util_pct"\nop = ">"\nvalue = 90\njob = "slurm:*"\n',
     6, "job selects jobs: a verdict rule or a GPU metric's (a job's GPUs); disk_util_pct is not "
        "a GPU metric"),
    ('[[alerts]]\nname = "b"\nfree_space = "/ckpt"\nbelow_gb = 1\njob_name = "x"\n', 5,
     "'job_name' does not go with a free_space condition"),
    ('[[alerts]]\nname = "b"\nverdict = "starved"\njob = 1001\n', 4,
     'job must be a glob or a list of globs, e.g. job = "slurm:*"'),
    ('[[alerts]]\nname = "b"\nverdict = "starved"\njob_name = []\n', 4,
     "job_name must be a glob or a list of globs"),
    ('[[alerts]]\nname = "b"\nverdict = "starved"\ncommand = ["x", "{job}"]\n', 4,
     "unknown placeholder {job} in command"),
])
def test_a_bad_job_matcher_is_one_line_naming_its_line(tmp_path, text, line, words):
    path = write(tmp_path, text)
    with pytest.raises(config.ConfigError) as err:
        config.load(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}: line {line}: ") and words in msg and "\n" not in msg, msg


NL_NAME = "slurm 1002 (tr\nain\x1b[2J.py)"


def node(i: int, b_state: str = "cpu-starved", c: bool = True):
    jobs = [("slurm:1001", "slurm 1001 (train.py)", (0, 1), "disk-starved"),
            ("slurm:1002", NL_NAME, (2,), b_state)]
    if c:
        jobs.append(("pid:77", "pid 77 (eval.py)", (3,), "disk-starved"))
    m, v, _, _ = interval(i, jobs)
    return m, v


def test_a_rule_naming_jobs_fires_per_job_from_its_own_verdict(tmp_path):
    out = tmp_path / "fired.jsonl"
    os.environ["OUT"] = str(out)
    try:
        per_job = verdict_rule(jobs=("slurm:*",), command=(*ARGV, "{job_id}", "{job_name}"))
        whole = verdict_rule(name="node-starving")
        eng, warns = engine(per_job, whole)
        fired = [eng.update(*node(i)) for i in (1, 2, 3)]
        assert [sorted(a.subject for a in f) for f in fired] == [
            [], ["", "slurm:1001", "slurm:1002"], []]
        by_subject = {a.subject: a for a in fired[1]}
        a = by_subject["slurm:1002"]
        assert a.env["GDT_ALERT_JOB_ID"] == "slurm:1002" and a.env["GDT_ALERT_STATE"] == "cpu-starved"
        assert a.env["GDT_ALERT_JOB_NAME"] == "slurm 1002 (tr\\x0aain\\x1b[2J.py)"
        assert a.message.startswith("job-starving: job slurm 1002 (tr\\x0aain\\x1b[2J.py) "
                                    "[slurm:1002]: cpu-starved for 2 samples")
        assert a.env["GDT_ALERT_PIDS"] == "1002"           # the job's GPU process, exactly
        assert by_subject["slurm:1001"].env["GDT_ALERT_PIDS"] == "1000 1001"
        # without a matcher: the node's verdict, as before, which names its worst job
        node_alert = by_subject[""]
        assert node_alert.env["GDT_ALERT_JOB_ID"] == "slurm:1001"
        assert node_alert.message.startswith("node-starving: disk-starved for 2 samples")
        assert wait_for(lambda: len(read_lines(out)) == 2)
        eng.close()
        assert warns == []
    finally:
        del os.environ["OUT"]
    # the placeholders, replaced inside the arguments (no shell), the name escaped
    assert sorted(read_lines(out)) == [["slurm:1001", "slurm 1001 (train.py)"],
                                       ["slurm:1002", "slurm 1002 (tr\\x0aain\\x1b[2J.py)"]]


def test_each_job_holds_and_cools_down_on_its_own():
    eng, _ = engine(verdict_rule(jobs=("slurm:*",), cooldown_s=5.0))
    assert eng.update(*node(1)) == []
    assert {a.subject for a in eng.update(*node(2))} == {"slurm:1001", "slurm:1002"}
    # slurm:1002 recovers, then starves again: its own cooldown, not its neighbour's
    eng.update(*node(3, b_state="healthy"))
    assert eng.update(*node(4)) == [] and eng.update(*node(5)) == []
    assert [a.subject for a in eng.update(*node(7))] == ["slurm:1002"]   # 5 s after it fired
    # a job that ended: its hold goes, and its cooldown once it has run out
    eng2, _ = engine(verdict_rule(jobs=("pid:*",), cooldown_s=0.0, for_samples=1))
    for i in range(1, 1001):                   # a sweep: a thousand starved runs in turn
        m, v, _, _ = interval(i, [(f"pid:{i}", f"run {i}", (0,), "disk-starved")])
        assert [a.subject for a in eng2.update(m, v)] == [f"pid:{i}"]
    assert len(eng2._last_fired_mono) <= 2 and len(eng2._holds) <= 1


def test_a_gpu_rule_naming_jobs_watches_only_their_gpus():
    rule = AlertRule(name="gpu-low", kind="metric", metric="gpu_util_pct", op="<", value=50.0,
                     jobs=("slurm:1002",), log=None)
    eng, _ = engine(rule)
    fired = eng.update(*node(1))              # every GPU at 10 %: only GPU 2 is slurm:1002's
    assert [a.subject for a in fired] == ["2"]
    assert fired[0].env["GDT_ALERT_JOB_ID"] == "slurm:1002"
    assert "GPU 2 (job slurm 1002 (tr\\x0aain\\x1b[2J.py) [slurm:1002])" in fired[0].message


def test_serve_runs_a_job_rule_for_the_matching_real_job_only(tmp_path):
    """Two real processes, each a job of its own on a stand-in GPU at 0 %: a rule that
    names one of them by its name fires for it alone, its command given its id and name."""
    out = tmp_path / "fired.jsonl"
    a = sleeper()
    b = sleeper(argv=[sys.executable, "-c", "import time; time.sleep(600)"])
    cfg = write(tmp_path, f"""\
[[alerts]]
name = "sleep-job-stalled"
verdict = "starved"
job = "pid:*"
job_name = "*(sleep)"
for_samples = 2
command = [{json.dumps(sys.executable)}, "-c", "import json, os, sys; open(sys.argv[1], 'a').write(json.dumps(sys.argv[2:] + [os.environ['GDT_ALERT_PIDS']]) + chr(10))", "{out}", "{{job_id}}", "{{job_name}}"]
""")
    proc = None
    try:
        proc, _url = start_serve(tmp_path, 2, {0: [a.pid], 1: [b.pid]}, "-i", "0.25",
                                 "--config", cfg)
        assert wait_for(lambda: out.exists() and out.read_text().strip(), 30 * slack())
        time.sleep(1.0)                        # a second sample's worth: nothing else fires
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30 * slack())
        proc = None
        runs = [json.loads(x) for x in out.read_text().splitlines()]
        assert runs == [[f"pid:{a.pid}", f"pid {a.pid} (sleep)", str(a.pid)]]
        logged = [x for x in err.splitlines() if " gpudisk-top alert " in x]
        assert len(logged) == 1 and f"job pid {a.pid} (sleep) [pid:{a.pid}]" in logged[0]
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.communicate()
        end(a)
        end(b)
