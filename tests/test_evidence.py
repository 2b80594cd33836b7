"""The verdict's culprits and the storage advice (verdict/detect/evidence.py): the advice
follows the evidence.  The real-machine cases (fio beside the loader job) are in
tests/test_evidence_real.py; these pin each branch of the rule."""

from __future__ import annotations

from gpudisk_top.verdict.detect.evidence import Culprit, culprits_clause, neighbours, storage_advice
from gpudisk_top.model.host import HostView

GIB_KB = 1048576


def host(total_gib=64, available_gib=40, cached_gib=4) -> HostView:
    return HostView(mem_total_kb=total_gib * GIB_KB, mem_available_kb=available_gib * GIB_KB,
                    cached_kb=cached_gib * GIB_KB)


FIO_A = Culprit(912, "fio", "sdb", 47.3, 5646.4)
FIO_B = Culprit(913, "fio", "sdb", 47.2, 5634.5)
RSYNC = Culprit(40, "rsync", "sdb", 12.0, 900.0)


def test_the_clause_is_the_one_every_surface_prints():
    assert culprits_clause([FIO_A, RSYNC]) == ("pid 912 (fio), 47% of its reads, "
                                               "pid 40 (rsync), 12% of its reads")
    assert Culprit(7, None, "sdb", None, 2048.0).clause() == "pid 7 (?), 2 MB/s"
    assert FIO_A.as_json() == {"pid": 912, "name": "fio", "device": "sdb",
                               "read_share_pct": 47.3, "read_kb_s": 5646.4,
                                "job_id": None, "job_name": None, "pids": [912]}


def test_a_neighbour_is_those_holding_most_of_the_reads_together():
    assert neighbours([FIO_A, FIO_B]) == [FIO_A, FIO_B]      # fio --numjobs=2: one neighbour
    assert neighbours([RSYNC]) == []                         # 12%: not what the job waits behind
    assert neighbours([]) == []


def test_a_neighbour_is_stopped_or_throttled_by_pid_whatever_the_cache():
    for direct in (True, False, None):
        advice = storage_advice(host(), [FIO_A, FIO_B], "sdb", direct, 100)
        assert advice.startswith("pids 912, 913 (fio) take 94% of sdb's reads"), advice
        assert "ionice -c3 -p 912 913" in advice and "io.max" in advice, advice
        assert "page cache" not in advice
    one = storage_advice(host(), [Culprit(912, "rsync", "sdb", 88.0, 1.0)], "sdb", False, None)
    assert one.startswith("pid 912 (rsync) takes 88% of sdb's reads") and "stop it" in one


def test_o_direct_readers_are_never_told_to_warm_the_page_cache():
    advice = storage_advice(host(), [RSYNC], "sdb", True, None)
    assert "O_DIRECT" in advice and "warm" not in advice, advice


def test_the_page_cache_only_when_the_data_fits():
    fits = storage_advice(host(available_gib=40), [], "sdb", False, 8 * GIB_KB)
    assert "8.0 GiB" in fits and "fit in the 40 GiB" in fits and "warm the page cache" in fits
    too_big = storage_advice(host(available_gib=40), [], "sdb", False, 300 * GIB_KB)
    assert "do not fit" in too_big and "warm" not in too_big, too_big
    # the data files' size unknown: memory decides, as before
    assert "warm the page cache" in storage_advice(host(), [], "sdb", None, None)
    assert "does not fit" in storage_advice(host(available_gib=4, cached_gib=40), [], "sdb",
                                            None, None)
    assert storage_advice(None, [], "sdb", None, None).startswith("faster storage")
