"""The probe results file and the probe's figures against hostile input (issue 25, items
4, 5 and 10): a FIFO or a link at probes.json, a file that shrinks while it is read, a
test that yields no reads, a rate of 0 or a run cut short.  Issue 35 item 4: a results
file nested 100,000 deep, cut short, empty, of a later version or not JSON, and a probe
with a ceiling of 0, said once through the real command line.  FIFOs and links are made
under tmp_path; what could hang runs in a child with a timeout."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from cli_run import gdt, gdt_argv
from gpudisk_top.errors import RuntimeFailure
from gpudisk_top.probe import store
from gpudisk_top.probe.runner import check, fingerprint
from gpudisk_top.probe.spec import BY_NAME, TestResult
from gpudisk_top.probe.target import Target
from proctree import children

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPEC = BY_NAME["randread_4k_qd32"]


def state_env(tmp_path) -> tuple[dict, str]:
    (tmp_path / "state" / "gpudisk-top").mkdir(parents=True)
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "state"), PYTHONPATH=ROOT)
    return env, str(tmp_path / "state" / "gpudisk-top" / "probes.json")


def one_error(proc: subprocess.CompletedProcess, pattern: str) -> str:
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("gpudisk-top: error: ")]
    assert len(errors) == 1 and pattern in errors[0], proc.stderr
    return errors[0]


# ------------------------------------------------------------- a FIFO at probes.json
def test_a_fifo_at_the_results_path_is_refused_by_probe_and_skipped_by_once(tmp_path):
    env, path = state_env(tmp_path)
    os.mkfifo(path)
    # --once reads the ceilings: it answers, without them
    once = gdt("--once", "--json", "-i", "0.2", env=env)
    assert once.returncode == 0, once.stderr
    assert json.loads(once.stdout)["disks"] is not None
    # probe refuses before it loads the device
    proc = gdt("probe", "--engine", "builtin", "--seconds", "1.5", "/var/tmp", env=env)
    one_error(proc, "is a FIFO, not a regular file")
    assert os.path.exists(path) and not os.path.isfile(path)   # still the FIFO


def test_record_with_a_fifo_at_the_results_path_records_and_stops_on_sigterm(tmp_path):
    env, path = state_env(tmp_path)
    os.mkfifo(path)
    out = tmp_path / "rec.gdt"
    proc = subprocess.Popen(gdt_argv("record", "-o", str(out), "-i", "0.2"),
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and proc.poll() is None:
            if out.exists() and out.stat().st_size > 0:
                break
            time.sleep(0.1)
        assert proc.poll() is None, proc.communicate()[1]
        assert out.exists() and out.stat().st_size > 0, "record wrote nothing"
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)   # the old code waited on the FIFO for ever
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, err
    assert "Traceback" not in err


def test_load_refuses_a_fifo_at_once(tmp_path):
    os.mkfifo(tmp_path / "probes.json")
    code = ("import sys\nfrom gpudisk_top.probe import store\nfrom gpudisk_top.errors import "
            "RuntimeFailure\ntry:\n    store.load(sys.argv[1])\nexcept RuntimeFailure as e:\n"
            "    print(e)\n")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "probes.json")],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert "not a regular file (a FIFO)" in proc.stdout, proc.stdout + proc.stderr


# ------------------------------------------------------------- a link at probes.json
def _result_doc(identity: str = "serial:x") -> dict:
    target = Target(arg="vda", device="vda", path="/dev/vda", kind="device",
                    span_bytes=2**31, identity=identity, identity_weak=False)
    from gpudisk_top.probe.runner import ProbeResult

    res = ProbeResult(target=target, engine="fio", seconds=10.0, measured_at_s=1.7e9)
    res.tests[SPEC.name] = TestResult(SPEC.name, "fio", 3.0, 9000, 3000.0, 11.7, 0.1, 0.3)
    return res.to_json()


def test_a_root_owned_link_at_the_results_path_is_never_written_through(tmp_path):
    victim = tmp_path / "victim.conf"
    victim.write_text("precious\n")
    link = tmp_path / "probes.json"
    os.symlink(victim, link)            # ours (root when the suite runs as root)
    with pytest.raises(RuntimeFailure, match="is a symbolic link .*not writing through it"):
        store.save(_result_doc(), str(link))
    assert victim.read_text() == "precious\n" and os.path.islink(link)
    # a dangling link is not followed to create its target either
    os.unlink(link)
    os.symlink(tmp_path / "nowhere", link)
    with pytest.raises(RuntimeFailure, match="does not exist"):
        store.save(_result_doc(), str(link))
    assert not (tmp_path / "nowhere").exists()


def test_probe_through_a_link_exits_non_zero_before_loading_the_device(tmp_path):
    env, path = state_env(tmp_path)
    victim = tmp_path / "victim.conf"
    victim.write_text("precious\n")
    os.symlink(victim, path)
    proc = gdt("probe", "--engine", "builtin", "--seconds", "1.5", "/var/tmp", env=env)
    one_error(proc, "is a symbolic link")
    assert "probe reads" not in proc.stderr        # refused before the device was loaded
    assert victim.read_text() == "precious\n"


def test_a_regular_results_file_is_still_replaced_whole(tmp_path):
    path = str(tmp_path / "probes.json")
    store.save(_result_doc("serial:a"), path)
    store.save(_result_doc("serial:b"), path)
    assert sorted(store.load(path)) == ["serial:a", "serial:b"]
    assert sorted(os.listdir(tmp_path)) == ["probes.json"]   # no temporary file left


# ------------------------------------------------------------- figures that are no ceiling
def _target(path: str, span: int) -> Target:
    return Target(arg=path, device="x", path=path, kind="file", span_bytes=span,
                  identity="name:x", identity_weak=True)


def _good() -> TestResult:
    return TestResult(SPEC.name, "fio", 1.0, 3000, 3000.0, 11.7, 0.1, 0.3)


def test_check_refuses_no_reads_a_zero_rate_a_short_run_and_a_changed_file(tmp_path):
    f = tmp_path / "data.bin"
    f.write_bytes(b"\0" * 8192)
    target = _target(str(f), 8192)
    fp = fingerprint(target)
    check(SPEC, _good(), 1.0, target, fp, fp)        # a sound test passes
    cases = {
        "no reads": dataclasses.replace(_good(), ios=0),
        "a rate of 0": dataclasses.replace(_good(), iops=0.0),
        "a rate of nan": dataclasses.replace(_good(), read_mib_s=float("nan")),
        "cut short": dataclasses.replace(_good(), seconds=0.2),
    }
    for why, r in cases.items():
        with pytest.raises(RuntimeFailure, match=why + ".*nothing kept"):
            check(SPEC, r, 1.0, target, fp, fp)
    os.truncate(f, 4096)                              # shrank while it was read
    with pytest.raises(RuntimeFailure, match="shrank to 4096 bytes"):
        check(SPEC, _good(), 1.0, target, fp, fingerprint(target))
    small = fingerprint(target)                       # or before this test began
    with pytest.raises(RuntimeFailure, match="shrank to 4096 bytes"):
        check(SPEC, _good(), 1.0, target, small, small)
    f.unlink()
    f.write_bytes(b"\0" * 8192)                       # replaced by another file
    with pytest.raises(RuntimeFailure, match="was replaced|changed"):
        check(SPEC, _good(), 1.0, target, fp, fingerprint(target))
    f.unlink()                                        # gone
    with pytest.raises(RuntimeFailure, match="could not be checked"):
        check(SPEC, _good(), 1.0, target, fp, fingerprint(target))


def test_a_stored_ceiling_of_zero_is_no_ceiling():
    doc = _result_doc()
    doc["ceiling"] = {"randread_qd32_iops": 0, "randread_qd1_iops": -1.0,
                      "seq_read_mib_s": 250.0}
    c = store.Ceiling.from_json(doc)
    assert c.randread_qd32_iops is None and c.randread_qd1_iops is None
    assert c.seq_read_mib_s == 250.0


# ------------------------------------------------------------- results files that are not
def _valid_doc(version=1) -> bytes:
    return json.dumps({"format": "gpudisk-top probes", "version": version,
                       "devices": {"serial:x": _result_doc()}}, indent=1).encode()


RESULTS_FILES = {
    "nested 100,000 deep": (b'{"format": "gpudisk-top probes", "version": 1, "devices": '
                            + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested deeper than 16"),
    "100,000 opening brackets": (b"[" * 100_000, "do not pair up"),
    "truncated": (_valid_doc()[:200], "cut short"),
    "empty": (b"", "is empty"),
    "of a future version": (_valid_doc(version=2), "written by a newer gpudisk-top"),
    "not JSON": (bytes(range(256)), "not a gpudisk-top probe results file"),
}


def _results_notes(err: str) -> list[str]:
    return [ln for ln in err.splitlines()
            if ln.startswith("gpudisk-top: warning: ") and "probes.json" in ln]


@pytest.mark.parametrize("kind", RESULTS_FILES)
def test_once_says_once_that_a_results_file_is_not_used_and_answers(tmp_path, kind):
    """issue 35: the nested file ended --once with RecursionError; the others were
    ignored without a word."""
    env, path = state_env(tmp_path)
    body, why = RESULTS_FILES[kind]
    with open(path, "wb") as f:
        f.write(body)
    once = gdt("--once", "--json", "-i", "0.2", env=env)
    assert once.returncode == 0 and "Traceback" not in once.stderr, once.stderr
    assert json.loads(once.stdout)["disks"] is not None
    notes = _results_notes(once.stderr)
    assert len(notes) == 1 and why in notes[0] and path in notes[0], once.stderr
    assert notes[0].endswith("; no ceilings from it")


def test_record_says_it_once_however_many_samples(tmp_path):
    env, path = state_env(tmp_path)
    with open(path, "wb") as f:
        f.write(RESULTS_FILES["truncated"][0])
    out = tmp_path / "r.gdtrec"
    proc = gdt("record", "-o", str(out), "-i", "0.2", "--duration", "2", env=env)
    assert proc.returncode == 0, proc.stderr
    assert len(_results_notes(proc.stderr)) == 1, proc.stderr
    assert out.stat().st_size > 0


def test_this_disks_probe_with_a_ceiling_of_zero_is_said_not_used(tmp_path):
    from gpudisk_top.collect.roots import Roots
    from gpudisk_top.probe.target import describe_devices, identity
    import realdisk

    roots = Roots()
    disk = realdisk.whole_disk(realdisk.BASE)
    key = identity(roots, describe_devices(roots), disk)[0]
    doc = _result_doc(key)
    doc["ceiling"]["randread_qd32_iops"] = 0
    env, path = state_env(tmp_path)
    with open(path, "w") as f:
        json.dump({"format": "gpudisk-top probes", "version": 1, "devices": {key: doc}}, f)
    once = gdt("--once", "--json", "-i", "0.2", env=env)
    assert once.returncode == 0, once.stderr
    notes = _results_notes(once.stderr)
    assert notes == [f"gpudisk-top: warning: {path}: the probe of {disk} ({key}) is not used: "
                     "its randread_qd32_iops '0' is not a rate"], once.stderr


def test_probe_refuses_a_newer_versions_file_before_loading_the_device(tmp_path):
    env, path = state_env(tmp_path)
    body = _valid_doc(version=2)
    with open(path, "wb") as f:
        f.write(body)
    proc = gdt("probe", "--engine", "builtin", "--seconds", "1.5", "/var/tmp", env=env)
    one_error(proc, "written by a newer gpudisk-top; this gpudisk-top reads version 1: "
                    "not replacing it")
    assert "probe reads" not in proc.stderr        # refused before the device was loaded
    with open(path, "rb") as f:
        assert f.read() == body


@pytest.mark.skipif(not __import__("shutil").which("fio"), reason="fio is not installed")
def test_fio_probe_of_a_file_that_shrinks_mid_run_fails_and_keeps_nothing(tmp_path, big_file):
    env, path = state_env(tmp_path)
    proc = subprocess.Popen(gdt_argv("probe", "--engine", "fio", "--seconds", "6", big_file),
                            cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and proc.poll() is None and not children(proc.pid):
            time.sleep(0.02)                     # until fio runs the first test
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.3)
        os.truncate(big_file, 1 << 20)
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 1, out + err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("gpudisk-top: error: ") and "failed" in last, err
    assert not os.path.exists(path)              # nothing kept


def test_the_builtin_reader_refuses_a_fifo_swapped_in_without_waiting(tmp_path):
    fifo = tmp_path / "data.bin"
    os.mkfifo(fifo)
    code = ("import sys\nfrom gpudisk_top.errors import RuntimeFailure\n"
            "from gpudisk_top.probe import builtin\nfrom gpudisk_top.probe.spec import BY_NAME\n"
            "try:\n    builtin.run(BY_NAME['randread_4k_qd1'], sys.argv[1], 1 << 28, 0.5)\n"
            "except RuntimeFailure as e:\n    print(e)\n")
    proc = subprocess.run([sys.executable, "-c", code, str(fifo)], capture_output=True,
                          text=True, timeout=60, cwd=ROOT)
    # refused at once, by our check or by the kernel (O_DIRECT on a FIFO: EINVAL)
    assert ("no longer a file or a block device" in proc.stdout
            or "cannot open" in proc.stdout), proc.stdout + proc.stderr
