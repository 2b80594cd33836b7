"""Fault round (issue 9, item 1): outputs the user names never harm what they point at.

`export -o` writes devices, FIFOs and links to them in place instead of replacing them
with a regular file; `record -o` refuses anything that is not a regular file or a new
path; links planted by another user and dangling links are never followed to create a
file; files are created with the umask's permissions (recordings 0640: command lines)."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from cli_run import gdt
from recording_helpers import sim_samples, write_recording


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    path = tmp_path_factory.mktemp("rec") / "r.gdtrec"
    write_recording(path, sim_samples("demo", 12))
    return str(path)


@pytest.mark.root(reason="mknod needs root")
def test_export_to_dev_null_leaves_the_device_a_device(recording, tmp_path):
    # a device node of our own (mknod of /dev/null's numbers), so the test never touches
    # the machine's /dev/null even if the code were wrong
    node = tmp_path / "null"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("mknod is not permitted here")
    proc = gdt("export", recording, "-f", "csv", "-o", str(node))
    assert proc.returncode == 0, proc.stderr
    st = os.lstat(node)
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)
    assert "wrote" in proc.stderr


def test_export_to_a_fifo_feeds_its_reader(recording, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo).read()))
    reader.start()
    proc = gdt("export", recording, "-f", "jsonl", "-o", str(fifo))
    reader.join(30)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)             # still a FIFO
    assert len(got) == 1 and got[0].count("\n") == 11         # 12 samples, 11 intervals


def test_export_to_dev_stdout_writes_to_stdout(recording):
    proc = gdt("export", recording, "-f", "csv", "-o", "/dev/stdout")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("time,wall_s,interval_s,state,kind,name")
    assert os.path.islink("/dev/stdout") or stat.S_ISCHR(os.lstat("/dev/stdout").st_mode)


def test_export_through_a_dangling_link_is_refused(recording, tmp_path):
    link = tmp_path / "out.csv"
    os.symlink(tmp_path / "target-elsewhere", link)
    proc = gdt("export", recording, "-f", "csv", "-o", str(link))
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "does not exist; not creating it" in proc.stderr
    assert not (tmp_path / "target-elsewhere").exists() and os.path.islink(link)


@pytest.mark.root(reason="making a link owned by another user needs root")
def test_export_through_another_users_link_is_refused(recording, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    link = tmp_path / "out.csv"
    os.symlink(victim, link)
    os.lchown(link, 65534, 65534)
    proc = gdt("export", recording, "-f", "csv", "-o", str(link))
    assert proc.returncode == 1 and "owned by another user" in proc.stderr
    assert victim.read_text() == "precious\n"


def test_export_replaces_a_regular_file_whole_and_keeps_its_mode(recording, tmp_path):
    out = tmp_path / "out.csv"
    out.write_text("old\n")
    os.chmod(out, 0o600)
    proc = gdt("export", recording, "-f", "csv", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert out.read_text().startswith("time,") and stat.S_IMODE(os.stat(out).st_mode) == 0o600
    assert [p for p in os.listdir(tmp_path) if "tmp" in p] == []


def test_new_files_follow_the_umask(recording, tmp_path):
    out = tmp_path / "new.csv"
    rec = tmp_path / "new.gdtrec"
    assert gdt("export", recording, "-f", "csv", "-o", str(out), umask=0o077).returncode == 0
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600   # the recording's 0640, less 077
    proc = gdt("record", "-o", str(rec), "--demo", "--duration", "0.3", "-i", "0.1", "-q",
               umask=0o022)
    assert proc.returncode == 0, proc.stderr
    # a recording holds the GPU processes' command lines: not for every user to read
    assert stat.S_IMODE(os.stat(rec).st_mode) == 0o640


@pytest.mark.parametrize("kind", [pytest.param("device", marks=pytest.mark.root(reason="mknod needs root")),
                                  "fifo", "dangling-link", "link"])
def test_record_refuses_what_is_not_a_regular_file(tmp_path, kind):
    target = tmp_path / "target"
    path = tmp_path / "out"
    if kind == "device":
        try:
            os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        except PermissionError:
            pytest.skip("mknod is not permitted here")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "dangling-link":
        os.symlink(target, path)
    else:
        write_recording(target, sim_samples("demo", 3))
        os.symlink(target, path)
    before = os.lstat(path)
    proc = gdt("record", "-o", str(path), "--demo", "--duration", "0.3", "-i", "0.1")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("gpudisk-top: error: ")
    after = os.lstat(path)
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)
    if kind == "dangling-link":
        assert not target.exists()
