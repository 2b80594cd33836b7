"""The `root` mark's one rule: a test that needs root (a loop device, a mount, unshare,
mknod, a link owned by or a process run as another user) carries
`@pytest.mark.root(reason="...")`, so `-m "not root"` leaves it out, and where this
process is not root it skips with that reason instead of failing.

The `fast` mark's one rule: the tests FAST names (a whole module, `module::test` for every
parametrization of one test, or `module::test[id]` for one) carry it, and no others.
`python -m pytest -m fast` runs them in under a minute on a 2-CPU machine, and between them
they import and run every module of gpudisk_top: `python tests/fast_lane_coverage.py`
checks that (README, Development)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

# A machine that sets PYTHONDONTWRITEBYTECODE (this one, and CI's) recompiled the package
# in every program a test starts (hundreds of `python -m gpudisk_top ...`) and the test
# modules in every worker: ~20% of the suite's CPU.  Bytecode is kept instead, outside the
# source tree (a prefix of this user's own under the temp directory), for this process
# and the programs it starts.
if os.environ.get("PYTHONDONTWRITEBYTECODE") and not os.environ.get("PYTHONPYCACHEPREFIX"):
    _PREFIX = os.path.join(tempfile.gettempdir(), f"gdt-pycache-{os.getuid()}")
    os.makedirs(_PREFIX, mode=0o700, exist_ok=True)
    if os.stat(_PREFIX).st_uid == os.getuid() and not os.path.islink(_PREFIX):
        del os.environ["PYTHONDONTWRITEBYTECODE"]
        os.environ["PYTHONPYCACHEPREFIX"] = _PREFIX
        sys.dont_write_bytecode = False
        sys.pycache_prefix = _PREFIX

FAST = (
    # whole modules, each a few seconds at most
    "test_alert_config.py", "test_alerts.py", "test_alone.py", "test_appkit.py", "test_architecture_doc.py", "test_alerts_hostile.py", "test_blockdev.py",
    "test_config.py", "test_deadline.py", "test_deploy_examples.py", "test_devmap.py",
    "test_diskstats.py", "test_docs.py", "test_episode_loss.py", "test_evidence.py", "test_examples.py",
    "test_export.py", "test_export_layering.py", "test_exporter.py",
    "test_fault_rates_consumers.py", "test_fault_record_sources.py", "test_filecache.py", "test_fleet_model.py", "test_fleet_trust.py",
    "test_freespace.py", "test_gpu.py", "test_health_outputs.py",
    "test_health_smartctl_text.py", "test_health_verdict.py", "test_hooks.py", "test_host.py",
    "test_layering.py", "test_loader_time.py", "test_mounts.py", "test_netfs_bounds.py",
    "test_netfs_stats.py", "test_one_voice.py", "test_pidmap.py", "test_spelling.py", "test_probe_doubt.py", "test_probe_units.py",
    "test_procio.py", "test_sample_cache.py", "test_sample_source.py", "test_sample_cost.py", "test_record_interval.py", "test_record_layering.py",
    "test_remote_words.py", "test_ticker.py", "test_timeparse.py", "test_visibility.py",
    "test_phases.py", "test_detect_unseen.py", "test_whatif_unprobed.py", "test_gpu_tiers.py",
    "test_make_day.py", "test_gcpolicy.py",
    "test_vocab.py", "test_whatif_corpus.py", "test_whatif_registry.py",
    # single tests of slower modules, for the modules of the package no module above runs
    "test_ascii.py::test_every_glyph_the_package_prints_has_an_ascii_form_as_wide",
    "test_ascii.py::test_to_ascii_keeps_every_cell", "test_ascii.py::test_ascii_replay_and_80x24",
    "test_ascii.py::test_term_dumb_refuses_a_screen_in_one_line",
    "test_cli_once.py::test_bad_options_are_one_line_errors",
    "test_cli_once.py::test_dashboard_without_a_tty_points_to_once",
    "test_cli_once.py::test_once_demo_is_labelled_and_complete",
    "test_cli_once.py::test_once_json_without_a_driver_is_complete",
    "test_cli_once.py::test_python_dash_m_is_the_same_program",
    "test_delayacct.py::test_a_setting_that_was_on_before_is_left_on",
    "test_detect.py::test_disk_starved_evidence_names_device_numbers_and_processes",
    "test_detect.py::test_straggler_names_the_slow_gpu",
    "test_health_live.py::test_demo_runs_no_smartctl_and_reads_no_real_health",
    "test_ledger.py::test_demo_total_and_split_equal_an_independent_count",
    "test_ledger.py::test_exporter_counters_only_grow_and_match_the_ledger",
    "test_ledger.py::test_one_interval_counts_unused_time_to_its_state_and_idle_gpus_apart",
    "test_ledger.py::test_the_jobs_healthy_median_becomes_the_reference_and_a_new_job_forgets_it",
    "test_ledger.py::test_ledger_line_json_and_cost_read_the_same",
    "test_ledger.py::test_a_bad_ledger_section_is_one_line_naming_it",
    "test_ledger.py::test_report_json_counts_the_same_ledger_by_either_path",
    "test_ledger.py::test_one_voice_the_lost_gpu_hours_read_the_same_on_every_surface",
    "test_ledger_summaries.py::test_the_demo_summaries_count_the_ledger_a_recompute_counts",
    "test_ledger_summaries.py::test_two_sessions_summaries_count_the_ledger_a_recompute_counts",
    "test_ledger_summaries.py::test_a_recording_whose_summaries_predate_the_ledger_still_reports",
    "test_health_parse.py::test_nvme_healthy_smartctl_7_1",
    "test_health_parse.py::test_trend_between_two_readings_of_one_drive",
    "test_health_ui.py::test_the_device_detail_of_an_unreadable_disk_says_why",
    "test_health_ui.py::test_the_text_report_has_a_device_health_section",
    "test_ioscan.py::test_the_scan_finds_the_reader_and_not_the_idle",
    "test_ioscan.py::test_the_search_for_who_takes_the_cpus_keeps_the_callers_slower_cadence",
    "test_reliability_smaller.py::test_loading_rules_grows_with_their_number_not_its_square",
    "test_reliability_smaller.py::test_the_episode_note_keeps_its_own_lines_and_escapes_the_machines",
    "test_reliability_smaller.py::test_a_command_past_its_timeout_takes_its_children_with_it",
    "test_recording_gaps.py::test_the_gap_rule",
    "test_recording_gaps.py::test_the_step_splits_at_a_gap_and_says_it",
    "test_recording_gaps.py::test_a_ledger_lists_its_longest_gaps_and_merges_them",
    "test_recording_gaps.py::test_utilizations_that_are_not_percentages_go_no_further",
    "test_scan_cgroups.py::test_what_is_read_again_and_what_is_carried_over",
    "test_scan_cgroups.py::test_a_process_that_exited_is_not_carried_over",
    "test_record_stalled_output.py::test_queued_recorder_never_blocks_append_and_marks_the_gap",
    "test_scan_cgroups.py::test_without_a_cgroup_v2_tree_every_process_is_read",
    "test_scan_cgroups.py::test_another_namespaces_procfs_is_not_narrowed",
    "test_probe_real.py::test_a_device_node_is_refused_to_a_user_who_may_not_read_it",
    "test_record_command.py::test_bad_arguments_are_usage_errors",
    "test_recorder.py::test_header_is_self_describing",
    "test_recorder.py::test_restart_appends_a_new_session",
    "test_recorder.py::test_retain_rotates_daily_and_drops_old_days",
    "test_replay.py::test_sessions_start_without_an_interval",
    "test_replay_ui.py::test_jump_to_a_time",
    "test_replay_ui.py::test_replay_without_a_terminal_and_bad_files",
    "test_replay_ui.py::test_step_forward_and_back",
    "test_report.py::test_a_window_of_many_blocks_is_charted_from_the_summaries",
    "test_report.py::test_report_runs_as_a_command",
    "test_report.py::test_text_report_has_charts_and_episodes",
    "test_serve.py::test_nodes_usage[argv1---nodes needs --demo]",
    "test_sim_health.py::test_every_disk_has_a_reading_of_its_class",
    "test_ui_fleet.py::test_a_prometheus_that_never_answers_times_out_on_screen_and_keys_go_on",
    "test_ui_fleet.py::test_fleet_matrix_snapshot_matches[table-80-24]",
    "test_ui_fleet.py::test_fleet_screenshot_matches",
    "test_ui_keys.py::test_e_lists_episodes_with_evidence",
    "test_ui_narrow.py::test_a_filter_and_all_devices_leave_a_trace_on_screen",
    "test_ui_narrow.py::test_header_flags_stay_whole_at_80x24_and_bang_shows_the_fix",
    "test_ui_redraw.py::test_a_panel_is_drawn_again_only_when_its_content_changed",
    "test_ui_redraw.py::test_the_timelines_rows_below_its_last_are_not_drawn_again",
    "test_ui_snapshots.py::test_matrix_snapshot_matches[nogpu-80-24]",
    "test_ui_snapshots.py::test_screenshot_matches[help]",
    "test_ui_snapshots.py::test_screenshot_matches[overview]",
    "test_ui_terminal.py::test_dashboard_in_gnu_screen",
    "test_jobid.py",
    "test_whatif_neighbour.py",
    "test_report_jobs.py::test_a_summary_blocks_job_rows_are_read_as_untrusted",
    "test_report_jobs.py::test_a_sweep_of_short_jobs_is_bounded_and_replayed",
    "test_fleet_jobs.py::test_one_job_on_two_nodes_by_its_id_and_its_straggler",
    "test_fleet_jobs.py::test_ids_of_one_node_are_not_one_job_across_nodes",
    "test_fleet_jobs.py::test_the_hand_written_job_label_is_the_fallback_of_older_exporters",
    "test_fleet_jobs.py::test_job_names_are_bounded_and_escaped_and_a_bad_id_is_dropped_alone",
    "test_ui_jobs.py::test_eight_single_gpu_jobs_fit_80x24_with_the_worst_in_the_banner",
    "test_ui_jobs.py::test_help_says_the_job_keys",
    "test_job_metrics.py::test_each_job_has_its_series_and_the_node_keeps_its_own",
    "test_job_metrics.py::test_an_ended_job_loses_its_state_at_once_and_every_series_after_the_retention",
    "test_job_metrics.py::test_a_thousand_short_lived_jobs_stay_bounded",
    "test_job_metrics.py::test_counters_only_grow_when_the_steppers_episode_list_forgets",
    "test_job_metrics.py::test_a_hostile_job_name_breaks_neither_the_exposition_nor_another_job",
    "test_job_alerts.py::test_job_and_job_name_parse_where_a_job_can_be_told",
    "test_job_alerts.py::test_a_bad_job_matcher_is_one_line_naming_its_line",
    "test_job_alerts.py::test_a_rule_naming_jobs_fires_per_job_from_its_own_verdict",
    "test_job_alerts.py::test_each_job_holds_and_cools_down_on_its_own",
    "test_job_alerts.py::test_a_gpu_rule_naming_jobs_watches_only_their_gpus",
    "test_cgjobs_harness.py::test_layouts_are_the_paths_the_schedulers_use",
    "test_cgjobs_harness.py::test_standin_takes_a_progress_file_per_gpu_or_one_for_all",
    "test_cgjobs_harness.py::test_host_root_writes_the_nodes_pod_and_container_files_under_its_own_root",
    "test_cgjob_rules.py",
    "test_gpu_tier_surfaces.py", "test_gpu_throttle.py", "test_gpu_procutil.py", "test_gpu_mig.py",
    "test_gpu_throttle_surfaces.py",
)


# the modules whose tests load the machine's real disk or CPUs and judge it: with xdist they
# run last, one after another, alone on the machine (tests/alone.py)
REAL_LOAD = (
    "test_container.py", "test_delayacct.py", "test_detect_real_disk.py",
    "test_evidence_real.py", "test_fault_matrix.py", "test_integration_fio.py", "test_io_culprit.py",
    "test_iostat_reference.py", "test_mb_units.py", "test_probe_real.py", "test_procio.py", "test_read_pages.py",
    "test_ledger.py", "test_real_jobs.py", "test_jobs_real.py", "test_thread_time.py", "test_remote_mount.py", "test_trainer_and_wrapped.py",
    "test_whatif_counterfactual.py", "test_incident_phases.py", "test_unseen_real.py",
    "test_detail_cadence.py",
)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """`-n auto`: one worker a CPU this process may use (its affinity, not the host's)."""
    return max(1, len(os.sched_getaffinity(0)))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "load":
        return None
    from alone import AloneLastScheduling
    return AloneLastScheduling(config, log, modules=frozenset(REAL_LOAD))


# what a worker's environment may differ in from the run's: execnet's workers start with
# COLUMNS=80 and LINES=24 set, which Rich (and so Textual and the error lines it prints)
# takes as the terminal's size
_WORKER_ENV = ("COLUMNS", "LINES")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    node.workerinput["gdt_env"] = {k: os.environ.get(k) for k in _WORKER_ENV}


def pytest_configure(config):
    """A worker's environment is the run's: the tests start programs that read it."""
    for key, value in getattr(config, "workerinput", {}).get("gdt_env", {}).items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _check_real_load(items):
    """A test marked as loading the machine is in a REAL_LOAD module: else it would run in
    parallel with the rest of the suite and judge the suite's load, not its own."""
    from alone import REAL_LOAD_MARKS
    wrong = sorted({item.path.name for item in items
                    if any(item.get_closest_marker(m) for m in REAL_LOAD_MARKS)} - set(REAL_LOAD))
    if wrong:
        raise pytest.UsageError(
            f"tests/conftest.py REAL_LOAD must name every module with a test marked "
            f"{', '.join(REAL_LOAD_MARKS)}; add: {', '.join(wrong)}")


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    _check_real_load(items)
    modules = {item.path.name: item.module for item in items if hasattr(item, "module")}
    missing = []
    for name in FAST:
        module, _, test = name.partition("::")
        test = test.split("[")[0]
        if not (here / module).is_file() or (test and module in modules
                                              and not hasattr(modules[module], test)):
            missing.append(name)
    if missing:
        # a renamed module or test would leave the fast lane quietly, and a module of the
        # package with it
        raise pytest.UsageError(f"tests/conftest.py FAST names what is not there: "
                                f"{', '.join(missing)}")
    fast = set(FAST)
    for item in items:
        if fast & {item.path.name, f"{item.path.name}::{item.originalname}",
                   f"{item.path.name}::{item.name}"}:
            item.add_marker(pytest.mark.fast)
    if os.geteuid() == 0:
        return
    for item in items:
        mark = item.get_closest_marker("root")
        if mark is not None:
            # a skip mark, not pytest.skip() in a hook: the report names the test's own file
            item.add_marker(pytest.mark.skip(reason=mark.kwargs.get("reason", "needs root")))


@pytest.fixture
def big_file():
    """A 256 MiB file on the real disk (/var/tmp: O_DIRECT, not tmpfs), allocated but never
    written (fallocate: instant; it reads as zeros), for the probe's tests."""
    path = f"/var/tmp/gdt-probe-{os.getpid()}.bin"
    try:
        with open(path, "wb") as f:
            os.posix_fallocate(f.fileno(), 0, 256 * 2**20)
    except OSError as err:
        if os.path.exists(path):
            os.unlink(path)
        pytest.skip(f"no 256 MiB file in /var/tmp: {err}")
    try:
        yield path
    finally:
        if os.path.exists(path):
            os.unlink(path)
