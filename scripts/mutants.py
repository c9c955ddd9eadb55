#!/usr/bin/env python3
"""Named mutants: break one mechanism at a time and check that the test suite notices.

Each mutant replaces one exact snippet of the package (the snippet must occur exactly once, so a
refactor that moves the code makes this script fail loudly instead of testing nothing), runs the
tests that guard that mechanism, and expects them to fail. The work happens in a copy of the
repository, so the working tree is never modified.

    python scripts/mutants.py            # every mutant (about 6 minutes on 2 cores, 4 at once)
    python scripts/mutants.py --list     # names only
    python scripts/mutants.py rotation-not-persisted overlap-dedup-removed

Prints one line per mutant (killed / SURVIVED) and exits 1 if any survived.
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXACT = "tests/sync/test_exactness.py"
ROBUST = "tests/sync/test_robustness.py"
STORAGE = "tests/sync/test_storage.py"
BACKFILL = "tests/sync/test_backfill.py"
EVENTS = "tests/events/test_events.py"
RENDER = "tests/events/test_render.py"
APPENDER = "tests/events/test_appender.py"
WEBHOOK = "tests/events/test_webhook.py"
SKIP_IDLE = "tests/sync/test_skip_idle.py"
SCHEDULE = "tests/sync/test_schedule.py"
SUPERSEDED = "tests/sync/test_superseded.py"
SPILL = "tests/sync/test_spill.py"
SUMMARY = "tests/sync/test_summary.py"
FLAGGED = "tests/sync/test_flagged.py"
REPORT_SUMMARY = "tests/analytics/test_report.py"
REPORT_JSON = "tests/analytics/test_report_json.py"
HEADLINE = "tests/analytics/test_report_headline.py"
LAKE_SUPERSEDED = "tests/lake/test_superseded_lake.py"
LAKE_NAMES = "tests/lake/test_names_lake.py"
NAMES = "tests/sync/test_names.py"
NAMES_REPORT = "tests/sync/test_names_report.py"
LIBRARY = "tests/sync/test_library.py"
ALLOCATORS = "tests/sync/test_allocators.py"
LAST_COMMIT = (
    "tests/sync/test_interrupt.py::"
    "test_ctrl_c_twice_during_the_last_commit_keeps_the_lock_until_it_ended"
)


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str  # file of the package, relative to the repository
    old: str
    new: str
    tests: tuple[str, ...]  # pytest node ids or files that must fail


MUTANTS = [
    # Names (issue 21): when the two listings are read, and what makes a version.
    Mutant(
        "names-read-every-run",
        "exporter/engine/walk.py",
        "        return (\n            cp.names_read_us is None\n",
        "        return True or (\n            cp.names_read_us is None\n",
        (f"{NAMES}::test_no_change_sync_sends_no_listing_request",),
    ),
    # The library API (`import exporter`) says what the command line says.
    Mutant(
        "interrupted-exit-code-fatal",
        "exporter/engine/sync.py",
        "    Outcome.INTERRUPTED: ExitCode.INTERRUPTED,\n",
        "",
        (f"{LIBRARY}::test_an_interrupted_run_has_the_exit_code_of_ctrl_c",),
    ),
    Mutant(
        "base-url-checked-after-the-run-began",
        "exporter/engine/sync.py",
        "    validate_base_url(config.base_url)\n",
        "",
        (f"{LIBRARY}::test_a_bad_base_url_is_refused_before_the_data_directory_is_touched",),
    ),
    Mutant(
        "sync-settings-unchecked",
        "exporter/engine/sync.py",
        "    check_settings(config)",
        "    pass",
        (
            f"{LIBRARY}::test_values_the_command_line_refuses_are_refused_before_anything_is_written",
        ),
    ),
    Mutant(
        "project-ids-string-iterated",
        "exporter/engine/settings.py",
        "    if isinstance(ids, str):",
        "    if False:",
        (
            f"{LIBRARY}::test_values_the_command_line_refuses_are_refused_before_anything_is_written",
        ),
    ),
    Mutant(
        "library-sync-fixes-the-mmap-threshold",
        "exporter/engine/sync.py",
        "    map_large_allocations: bool = False\n",
        "    map_large_allocations: bool = True\n",
        (f"{ALLOCATORS}::test_a_library_sync_leaves_the_process_allocator_as_it_was",),
    ),
    Mutant(
        "cli-sync-keeps-the-dynamic-mmap-threshold",
        "exporter/cli/_sync.py",
        "        map_large_allocations=True,",
        "        map_large_allocations=False,",
        (f"{ALLOCATORS}::test_the_command_line_sync_maps_large_allocations",),
    ),
    Mutant(
        "status-file-url-as-path",
        "exporter/ops/status.py",
        "    with reading(data_dir) as local:  # where the CLI's --data-dir and connect() look\n"
        "        return _read_status(local, runs, as_of)\n",
        "    return _read_status(Path(data_dir), runs, as_of)\n",
        (f"{LIBRARY}::test_status_and_check_read_a_file_url_as_sync_and_connect_do",),
    ),
    Mutant(
        "check-file-url-as-path",
        "exporter/ops/check.py",
        "    with reading(data_dir) as local:  # where the CLI's --data-dir and connect() look\n"
        "        return _run_check(local,",
        "    if True:\n        return _run_check(Path(data_dir),",
        (f"{LIBRARY}::test_status_and_check_read_a_file_url_as_sync_and_connect_do",),
    ),
    Mutant(
        "names-max-age-ignored",
        "exporter/engine/walk.py",
        "            or not 0 <= self.clock() - cp.names_read_us < self.names_max_age_us\n",
        "",
        (
            f"{NAMES}::test_no_change_sync_sends_no_listing_request",
            f"{NAMES}::test_rename_makes_two_versions_and_older_operations_keep_the_old_name",
        ),
    ),
    Mutant(
        "names-unknown-id-ignored",
        "exporter/engine/walk.py",
        "            or bool(self.unknown_ids)\n",
        "",
        (f"{NAMES}::test_new_branch_appears_in_the_same_run_and_costs_two_requests",),
    ),
    Mutant(
        "names-due-not-persisted",
        "exporter/engine/walk.py",
        "            self.chunk.names_due = True\n",
        "",
        (f"{NAMES}::test_a_run_cut_short_before_the_listings_leaves_them_due",),
    ),
    Mutant(
        "names-left-by-budget-counted-done",  # a run leaving the listings due said `ok`
        "exporter/engine/sync.py",
        "        left = error is None and walk.result.names_left\n",
        "        left = False\n",
        (f"{NAMES}::test_a_run_cut_short_before_the_listings_leaves_them_due",),
    ),
    Mutant(
        "budget-fell-short-ignored",  # work left whole for later (the listings): outcome `ok`
        "exporter/engine/sync.py",
        "summary.settle(self.budget.reached or self.budget.fell_short)",
        "summary.settle(self.budget.reached)",
        (f"{NAMES}::test_a_run_cut_short_before_the_listings_leaves_them_due",),
    ),
    Mutant(
        "names-deletion-not-marked",
        "exporter/store/state.py",
        '                "deleted_us IS NULL AND id NOT IN (SELECT id FROM _listed)",\n',
        '                "deleted_us IS NULL AND id NOT IN (SELECT id FROM _listed) AND 0",\n',
        (f"{NAMES}::test_deleted_branch_keeps_its_name_and_gets_deleted_at",),
    ),
    Mutant(
        "names-counters-versioned",  # a branch's cpu_used_sec moves on every read
        "exporter/core/names.py",
        '        ("expires_at", TIMESTAMP),\n',
        '        ("expires_at", TIMESTAMP),\n        ("cpu_used_sec", INT),\n',
        (f"{NAMES}::test_moving_counters_add_no_version_and_unnamed_computes_stay_null",),
    ),
    # The table and the page fetch only the rows they show of the failing and stuck lists.
    Mutant(
        "report-shown-rows-total-ignored",  # "(10 of 10 rows)" for 10 of 195k
        "exporter/analytics/report_text.py",
        "_table_top(columns, _section_rows(rows, columns), top, totals.get(cut))",
        "_table_top(columns, _section_rows(rows, columns), top)",
        (f"{HEADLINE}::test_a_report_of_the_shown_rows_reads_as_the_whole_one",),
    ),
    Mutant(
        "report-shown-rows-every-failing-one-old",  # old: not counted, every row taken
        "sql/90_report.sql",
        "        kind, count(*) AS total, count(*) FILTER (WHERE old) AS old_total,\n",
        "        kind, count(*) AS total, count(*) AS old_total,\n",
        (f"{HEADLINE}::test_a_cut_report_counts_the_old_failing_ones_of_the_whole_list",),
    ),
    Mutant(
        "report-shown-rows-branch-not-joined",  # the rows a table shows by branch id only
        "sql/90_report.sql",
        "LEFT JOIN branches AS sb ON sb.id = s.p.branch_id\n",
        "LEFT JOIN branches AS sb ON false\n",
        (f"{NAMES_REPORT}::test_report_failures_per_branch_by_name_deleted_marked",),
    ),
    Mutant(
        "report-shown-groups-total-ignored",  # "Failures per project": 10 rows, no "of 5,000"
        "exporter/analytics/report_figures.py",
        '            found[f"{name}_total"] = counts.get(kind, 0)\n',
        "            pass\n",
        (f"{HEADLINE}::test_a_report_of_the_shown_rows_reads_as_the_whole_one",),
    ),
    Mutant(
        "report-shown-rows-written-as-whole",  # json or csv of 10 rows of a list
        "exporter/analytics/report.py",
        '            raise ValueError(f"the report\'s lists hold only their first {self.top} rows")',
        "            pass",
        (f"{HEADLINE}::test_a_report_of_the_shown_rows_reads_as_the_whole_one",),
    ),
    # Names in the report and check (issue 21): by name, deleted marked, one row per id.
    Mutant(
        "report-branch-names-not-joined",  # the report's branches by id only
        "sql/90_report.sql",
        "LEFT JOIN branches AS b ON b.id = g.branch_id\n",
        "LEFT JOIN branches AS b ON false\n",
        (f"{NAMES_REPORT}::test_report_failures_per_branch_by_name_deleted_marked",),
    ),
    Mutant(
        "report-on-call-branch-not-joined",  # failing/stuck operations by branch id only
        "sql/90_report.sql",
        "LEFT JOIN branches AS b ON b.id = p.branch_id\n",
        "LEFT JOIN branches AS b ON false\n",
        (f"{NAMES_REPORT}::test_report_failures_per_branch_by_name_deleted_marked",),
    ),
    Mutant(
        "report-deleted-branch-not-marked",
        "exporter/analytics/format.py",
        "{', deleted' if deleted else ''}",
        "",
        (
            f"{NAMES_REPORT}::test_report_failures_per_branch_by_name_deleted_marked",
            f"{NAMES}::test_check_names_the_branch_a_failure_rate_comes_from",
        ),
    ),
    Mutant(
        "failure-counts-failing-now-miscounted",  # the one definition every failures_by_* uses
        "sql/00_base.sql",
        "count(*) FILTER (WHERE is_failing(status)) AS failing_now",
        "count(*) FILTER (WHERE is_failed(failures_count)) AS failing_now",
        ("tests/analytics/test_views.py", "tests/analytics/test_cli.py::test_report_json"),
    ),
    Mutant(
        "names-read-together-twice",  # a branch several datasets listed counted once per dataset
        "exporter/analytics/views.py",
        "ORDER BY last_seen_at DESC NULLS LAST, _rank) = 1)",
        "ORDER BY last_seen_at DESC NULLS LAST, _rank) >= 1)",
        ("tests/sync/test_read_together.py",),
    ),
    Mutant(
        "refresh-removed",
        "exporter/engine/walk.py",
        "            self._refresh_open(pager)\n",
        "            pass\n",
        (
            f"{EXACT}::test_1_unchanged_gets_advance_the_rotation",
            f"{ROBUST}::test_2_no_change_refresh_costs_the_minimum",
        ),
    ),
    Mutant(
        "rotation-not-persisted",
        "exporter/core/model.py",
        "            or self.open_upserts\n",
        "",
        (f"{EXACT}::test_1_unchanged_gets_advance_the_rotation",),
    ),
    Mutant(
        "failed-is-terminal",
        "exporter/core/model.py",
        'TERMINAL_STATUSES = frozenset({"finished", "cancelled", "skipped"})',
        'TERMINAL_STATUSES = frozenset({"finished", "cancelled", "skipped", "failed"})',
        (f"{BACKFILL}::test_incremental_sync_records_every_observed_state",),
    ),
    Mutant(
        "stop-at-less-or-equal",
        "exporter/engine/walk.py",
        "oldest < second(cp.checkpoint_us):",
        "oldest <= second(cp.checkpoint_us):",
        (f"{ROBUST}::test_late_arrivals_in_the_checkpoint_second_across_pages",),
    ),
    Mutant(
        "boundary-second-all-old",  # `<=` in the new-or-old test: loses late same-second ops
        "exporter/engine/walk.py",
        "or s > cp_second or (s == cp_second and op_id not in boundary)\n",
        "or s > cp_second\n",
        (
            f"{BACKFILL}::test_ties_at_page_boundaries_lose_and_duplicate_nothing",
            "tests/sync/test_property.py",
        ),
    ),
    Mutant(
        "boundary-second-all-new",  # `<`: re-adds the boundary operations
        "exporter/engine/walk.py",
        "or (s == cp_second and op_id not in boundary)\n",
        "or s == cp_second\n",
        (
            f"{BACKFILL}::test_ties_at_page_boundaries_lose_and_duplicate_nothing",
            "tests/sync/test_property.py",
        ),
    ),
    Mutant(
        "overlap-dedup-removed",
        "exporter/engine/walk.py",
        "if op_id in previous or op_id in taken:",
        "if False:",
        (f"{EXACT}::test_12_resumed_walk_is_exact_with_an_inclusive_cursor",),
    ),
    Mutant(
        "timestamp-overlap-filter",  # the old filter that dropped an out-of-order operation
        "exporter/engine/walk.py",
        "            kept_ids, kept_seconds = page_ids, seconds\n",
        "            kept = [k for k, c in enumerate(created) if self.lowest is None or c <= self.lowest]\n"
        "            ops, raws, created = [ops[k] for k in kept], [raws[k] for k in kept], [created[k] for k in kept]\n"
        "            kept_ids, kept_seconds = [page_ids[k] for k in kept], [seconds[k] for k in kept]\n",
        (f"{EXACT}::test_3_fractional_created_at_among_whole_seconds_is_kept",),
    ),
    Mutant(
        "views-rewritten-when-nothing-changed",  # issue 24: ~0.2 s of CPU (a child) per run
        "exporter/analytics/views_db.py",
        "    if exists and dataset.state.get_meta(_VIEWS_KEY) == key:\n",
        "    if False:\n",
        (
            "tests/sync/test_views_refresh.py::"
            "test_a_sync_that_commits_no_new_file_leaves_the_views_database_alone",
        ),
    ),
    Mutant(
        "views-written-whole-when-only-files-changed",  # issue 24: ~0.07 s of the child's CPU
        "exporter/analytics/views_db.py",
        "    files_only = exists and dataset.state.get_meta(_SHAPE_KEY) == shape\n",
        "    files_only = False\n",
        (
            "tests/sync/test_views_refresh.py::"
            "test_when_only_the_files_changed_only_the_definitions_naming_them_are_written",
        ),
    ),
    Mutant(
        "views-files-only-whatever-the-shape",  # a moved directory, a new source: written whole
        "exporter/analytics/views_db.py",
        "    files_only = exists and dataset.state.get_meta(_SHAPE_KEY) == shape\n",
        "    files_only = exists\n",
        (
            "tests/sync/test_views_refresh.py::"
            "test_when_only_the_files_changed_only_the_definitions_naming_them_are_written",
        ),
    ),
    Mutant(
        "views-shape-kept-through-a-whole-write",  # a killed run's file taken for the old shape
        "exporter/analytics/views_db.py",
        '        dataset.state.set_meta(_SHAPE_KEY, "")\n',
        "        pass\n",
        (
            "tests/sync/test_views_refresh.py::"
            "test_a_file_written_whole_by_a_killed_run_is_never_taken_for_one_of_its_old_shape",
        ),
    ),
    Mutant(
        "views-db-killed-writers-copies-kept",  # each kill -9 mid-write leaves a copy for good
        "exporter/analytics/views.py",
        "        stale.unlink(missing_ok=True)\n",
        "        pass\n",
        (
            "tests/sync/test_views_refresh.py::"
            "test_a_views_database_write_killed_before_its_rename_leaves_nothing_behind_it",
        ),
    ),
    Mutant(
        "sync-options-load-check",  # issue 24: ~12 ms of every sync's start
        "exporter/cli/_ops.py",
        "        from exporter.core.timeutil import parse_duration  # not ops.check: sync never loads it\n",
        "        from exporter.ops.check import parse_duration\n",
        ("tests/test_import_costs.py::test_a_sync_s_duration_options_load_no_check_code",),
    ),
    Mutant(
        "overlap-check-skipped",  # issue 24: a page taken whole although it overlaps the last
        "exporter/engine/walk.py",
        "        if len(ids) == len(page_ids) and previous.isdisjoint(ids):\n",
        "        if True:\n",
        (f"{EXACT}::test_12_resumed_walk_is_exact_with_an_inclusive_cursor",),
    ),
    Mutant(
        "resume-forgets-the-last-page-ids",  # an overlapping first page after a resume
        "exporter/engine/walk.py",
        "            tail_ids = frozenset(o.id for o, s in zip(ops, seconds) if s == oldest)\n",
        "            tail_ids = frozenset()\n",
        (f"{EXACT}::test_12_resumed_walk_is_exact_with_an_inclusive_cursor",),
    ),
    Mutant(
        "tracked-taken-for-new-in-a-page",  # issue 24: a page's runs of new operations
        "exporter/engine/walk.py",
        "        for k in [k for k, op_id in enumerate(kept_ids) if op_id in tracked] + [len(kept_ids)]:\n",
        "        for k in [len(kept_ids)]:\n",
        (f"{BACKFILL}::test_incremental_sync_records_every_observed_state",),
    ),
    Mutant(
        "to-micros-reads-any-iso-form",  # issue 24: the C parser reads more than RFC 3339
        "exporter/core/timeutil.py",
        '        and text[10] == "T"\n',
        "",
        ("tests/sync/test_timestamps.py",),
    ),
    Mutant(
        "resume-rewalk-removed",
        "exporter/engine/walk.py",
        "            if resumed:\n",
        "            if False:\n",
        (f"{ROBUST}::test_resumed_walk_also_reads_what_arrived_meanwhile",),
    ),
    Mutant(
        "compaction-inputs-hidden-early",  # the swap in two steps: readers lose rows between
        "exporter/store/state.py",
        '                "UPDATE files SET replaced_by = ? WHERE path = ?",',
        "                \"UPDATE files SET replaced_by = ?, state = 'deleting' WHERE path = ?\",",
        (STORAGE,),
    ),
    Mutant(
        "compaction-garbage-before-views",
        "exporter/engine/publish.py",
        "    if local is not None and not refresh_views_database(local):\n        return False\n    store.collect_garbage()\n",
        "    store.collect_garbage()\n    if local is not None and not refresh_views_database(local):\n        return False\n",
        (STORAGE,),
    ),
    Mutant(
        "recovery-skipped",
        "exporter/store/local/dataset.py",
        '        pending = self.state.files_in("pending")\n',
        "        pending = []\n",
        (STORAGE,),
    ),
    Mutant(
        "redaction-removed",
        "exporter/core/errors.py",
        '    by [REDACTED]."""\n',
        '    by [REDACTED]."""\n    return text\n',
        (f"{ROBUST}::test_9_a_server_echoing_the_key_never_gets_it_printed_or_stored",),
    ),
    Mutant(
        "key-check-removed",
        "exporter/api/client.py",
        "    if not _KEY_CHARS.fullmatch(key):\n",
        "    if False:\n",
        (f"{ROBUST}::test_9_a_malformed_key_is_a_key_error_at_once",),
    ),
    Mutant(
        "error-not-through-committer",
        "exporter/engine/sync.py",
        "            committer.submit(Chunk(pid, error=error))\n",
        "            self.dataset.state.query('UPDATE projects SET last_error = ? WHERE id = ?', (error, pid))\n",
        (f"{EXACT}::test_8_last_error_of_a_failed_project_survives",),
    ),
    Mutant(
        "shared-listing-failure-swallowed",
        "exporter/api/discovery.py",
        '        found.errors.append(f"listing shared projects failed: {exc}")\n',
        "        pass\n",
        (f"{EXACT}::test_4_failing_shared_listing_makes_the_run_partial",),
    ),
    Mutant(
        "shared-deletions-ignored",
        "exporter/api/discovery.py",
        "        return [] if self.explicit or not self.complete else list(self.scopes_listed)",
        "        return [] if self.explicit or not self.complete else [s for s in self.scopes_listed if s != SHARED]",
        (f"{EXACT}::test_5_vanished_shared_project_is_marked_deleted",),
    ),
    Mutant(
        "one-404-forgets",
        "exporter/engine/walk.py",
        "            if entry.misses + 1 >= MAX_MISSES and removed:\n",
        "            if True:\n",
        (f"{EXACT}::test_14_transient_404_does_not_stop_tracking",),
    ),
    Mutant(
        "young-operation-404s-taken-as-gone",
        "exporter/engine/walk.py",
        "            removed = now - entry.created_us >= RETENTION_US or self._far_ahead(entry.created_us)\n",
        "            removed = True\n",
        (f"{EXACT}::test_14_repeated_404s_of_a_young_operation_do_not_stop_tracking",),
    ),
    Mutant(
        "operation-past-retention-tracked-for-good",
        "exporter/engine/walk.py",
        "            removed = now - entry.created_us >= RETENTION_US or self._far_ahead(entry.created_us)\n",
        "            removed = self._far_ahead(entry.created_us)\n",
        (f"{EXACT}::test_14_an_operation_past_retention_that_keeps_answering_404_is_dropped",),
    ),
    Mutant(
        "finished-not-read-again",
        "exporter/engine/walk.py",
        "if op.status not in terminal or fresh[k] or created[k] >= above\n",
        "if op.status not in terminal or created[k] >= above\n",
        (f"{ROBUST}::test_a_finished_operation_stays_tracked_while_it_settles",),
    ),
    Mutant(
        "timestamps-compared-to-the-microsecond",
        "exporter/engine/walk.py",
        "    return us // US_PER_SECOND\n",
        "    return us\n",
        (f"{ROBUST}::test_whole_second_arrivals_after_a_fractional_checkpoint",),
    ),
    Mutant(
        "worker-error-does-not-cancel",
        "exporter/engine/sync.py",
        "                self.cancel.set()\n                for f in futures:\n                    f.cancel()\n",
        "                pass\n",
        (f"{ROBUST}::test_15_an_unexpected_error_in_one_worker_cancels_the_others",),
    ),
    Mutant(
        "api-down-never-stops",
        "exporter/api/client.py",
        "                and silent >= policy.down_after_seconds\n",
        "                and False\n",
        (f"{ROBUST}::test_16_api_down_for_everything_stops_the_run_early",),
    ),
    Mutant(
        "cheapest-plan-ignored",  # always GET one by one (the 7x cost of the review)
        "exporter/engine/walk.py",
        "            if self._extension_plan(below, lowest, pages_left) == 0:\n",
        "            if True:\n",
        (f"{ROBUST}::test_2_no_change_refresh_costs_the_minimum",),
    ),
    Mutant(
        "datasets-read-together-without-an-owner",
        "exporter/analytics/views.py",
        # both views that keep only the owner's history (stored and with names joined)
        "FROM ({stored}) AS v\nSEMI JOIN owner ON v.id = owner.id AND v._rank = owner._rank;\n"
        "CREATE OR REPLACE VIEW operation_versions AS\n{owner}\nSELECT v.* EXCLUDE (_rank)\n"
        "FROM ({versions}) AS v\nSEMI JOIN owner ON v.id = owner.id AND v._rank = owner._rank;",
        "FROM ({stored}) AS v;\n"
        "CREATE OR REPLACE VIEW operation_versions AS\n{owner}\nSELECT v.* EXCLUDE (_rank)\n"
        "FROM ({versions}) AS v;",
        (
            "tests/sync/test_read_together.py::"
            "test_overlapping_datasets_hold_each_operation_once_in_its_newest_state",
        ),
    ),
    # An odd number in a typed column (issue 24): NULL, never truncated (1.5 is not 1).
    Mutant(
        "ints-truncate-floats",
        "exporter/engine/records.py",
        "        inferred = pa.array(values)\n",
        "        inferred = pa.array(values, type=pa.int64())\n",
        ("tests/sync/test_recorded.py::test_a_fractional_number_is_null_not_truncated",),
    ),
    # -- issue 19, exact storage (kept together: other helpers append at the end) ----------
    Mutant(
        "query-temp-directory-readable",  # DuckDB allows $PWD/.tmp besides the datasets
        "exporter/analytics/views.py",
        "        \"SET temp_directory = ''\",\n",
        "",
        ("tests/analytics/test_read_only.py::test_duckdb_temporary_directory_is_not_readable",),
    ),
    Mutant(
        "query-linked-folders-not-allowed",  # a linked partition folder makes queries exit 7
        "exporter/store/local/reader.py",
        "            (directories if is_dir else files).append(real)\n",
        "            pass\n",
        (
            "tests/analytics/test_read_only.py::"
            "test_linked_folders_and_files_of_the_dataset_are_read",
        ),
    ),
    Mutant(
        "storage-options-any-name",  # the allow-list let through: secrets by any alias
        "exporter/store/lake/location.py",
        "        if not known_option(key):\n",
        '        if key.upper() in ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):\n',
        ("tests/lake/test_location.py::test_only_known_non_secret_options_are_accepted",),
    ),
    Mutant(
        "location-repr-shows-values",
        "exporter/store/lake/location.py",
        'return f"Location({self.display!r}, options={sorted(self.options)!r})"',
        'return f"Location({self.display!r}, options={dict(self.options)!r})"',
        ("tests/lake/test_location.py::test_repr_shows_no_option_value",),
    ),
    # Names on object storage (issue 21): in the same commit as the operations they explain.
    Mutant(
        "lake-names-not-with-the-commit",  # names tables never written with their batch
        "exporter/store/lake/store.py",
        "lease=self.lease, names=names",
        "lease=self.lease, names=()",
        (
            f"{LAKE_NAMES}::test_a_kill_between_the_operations_and_the_names_leaves_nothing_half_written",
        ),
    ),
    Mutant(
        "lake-names-read-unpinned",  # readers take names tables of a batch not committed
        "exporter/store/lake/reader.py",
        "*((t.file, t.name, txn) for t in NAMES_TABLES),",
        "*((t.file, t.name, None) for t in NAMES_TABLES),",
        (
            f"{LAKE_NAMES}::test_a_kill_between_the_operations_and_the_names_leaves_nothing_half_written",
        ),
    ),
    Mutant(
        "local-names-read-from-lagging-files",  # a kill before the export: names missing
        "exporter/store/local/reader.py",
        "        if not state.keeps_names() or state.get_meta(EXPORTED_META) == state.names_generation():\n",
        "        if True:\n",
        (
            f"{NAMES}::test_a_kill_before_the_names_export_leaves_the_views_with_the_committed_names",
        ),
    ),
    Mutant(
        "lake-names-orphans-not-repaired",  # a retry of batch N adopts the names N left
        "exporter/store/lake/tables.py",
        "            repair(committed or 0)  # before the objects that mark the orphans are gone\n",
        "            pass\n",
        (f"{LAKE_NAMES}::test_names_an_attempt_left_are_not_taken_by_the_next_commit",),
    ),
    Mutant(
        "lake-unreadable-history-means-absent",  # deletes the state a landed commit names
        "exporter/store/lake/tables.py",
        "                continue\n            if found is not None and found[0] == key:",
        "                return None\n            if found is not None and found[0] == key:",
        ("tests/lake/test_tables.py::test_landed_commit_whose_history_read_fails",),
    ),
    Mutant(
        "lake-history-read-once",  # one failed read fails the run (no retry)
        "exporter/store/lake/tables.py",
        "LANDED_READS = 3\n",
        "LANDED_READS = 1\n",
        ("tests/lake/test_tables.py::test_landed_commit_whose_history_read_fails",),
    ),
    Mutant(
        "lease-dead-holder-waits-out-the-ttl",  # kill -9 blocks the next sync for 2 minutes
        "exporter/store/lake/lease.py",
        "            or current.holder_is_dead(self.machine)\n",
        "",
        (
            "tests/lake/test_lease.py::test_a_killed_holder_of_this_machine_is_taken_over_at_once",
            "tests/lake/test_sync_lake.py::test_the_next_sync_after_a_kill_9_starts_at_once",
        ),
    ),
    Mutant(
        "lease-holder-judged-by-pid-alone",  # a reused pid keeps a dead holder's lease
        "exporter/store/lake/lease.py",
        "        return process_started(self.pid) != self.started\n",
        "        return process_started(self.pid) is None\n",
        ("tests/lake/test_lease.py::test_a_reused_pid_does_not_keep_a_dead_holders_lease",),
    ),
    Mutant(
        "lease-other-machines-pids-trusted",  # another host's lease taken by a local pid check
        "exporter/store/lake/lease.py",
        "        if machine is None or self.machine != machine or self.pid is None",
        "        if machine is None or self.pid is None",
        ("tests/lake/test_lease.py::test_a_dead_holder_of_another_machine_must_expire",),
    ),
    Mutant(
        "doctor-transient-as-key-advice",  # one 500 told a personal key to use another key
        "exporter/ops/doctor.py",
        "TRANSIENT_STATUSES = frozenset({408, 423, 425, 429, 500, 502, 503, 504})",
        "TRANSIENT_STATUSES: frozenset[int] = frozenset()",
        ("tests/ops/test_doctor.py::test_a_transient_failure_is_not_advice_about_the_key",),
    ),
    Mutant(
        "refused-first-connection-retried-as-usual",  # 87 s of retries before exit 5
        "exporter/api/client.py",
        "            if self._any_answer:\n                return\n",
        "            if True:\n                return\n",
        ("tests/sync/test_failures.py::test_a_refused_first_connection_fails_in_seconds",),
    ),
    # The client's own HTTP transport (issue 24): what httpx did for it.
    Mutant(
        "http-no-decoding",  # gzip/deflate bodies handed on compressed
        "exporter/api/http.py",
        "    if not encoding or not body:\n",
        "    if True:\n",
        ("tests/sync/test_http.py::test_compressed_pages_are_decoded_exactly",),
    ),
    Mutant(
        "https-unverified",  # any certificate accepted: the key goes to whoever answers
        "exporter/api/http.py",
        "            self._context = ssl.create_default_context(cafile=certifi.where())\n",
        "            self._context = ssl._create_unverified_context()\n",
        ("tests/sync/test_http.py::test_https_is_verified_against_the_ca_bundle",),
    ),
    Mutant(
        "http-reuses-closed-connections",  # an idle connection the server closed is sent on
        "exporter/api/http.py",
        "                if conn.sock is not None and not _readable(conn.sock):\n",
        "                if conn.sock is not None:\n",
        ("tests/sync/test_http.py::test_a_connection_the_server_closed_while_idle_is_not_reused",),
    ),
    Mutant(
        "http-no-keep-alive",  # every request on a new connection
        "exporter/api/http.py",
        "            if keep:\n",
        "            if False:\n",
        ("tests/sync/test_http.py::test_keep_alive_reuses_one_connection",),
    ),
    Mutant(
        "retry-ignores-max-elapsed",
        "exporter/api/client.py",
        "                if time.monotonic() - started >= policy.max_elapsed:  # (fewer attempts made)\n",
        "                if False:\n",
        ("tests/sync/test_http.py::test_retries_stop_once_max_elapsed_has_passed",),
    ),
    Mutant(
        "retry-one-attempt-more",
        "exporter/api/client.py",
        "                if attempt >= policy.max_attempts:\n",
        "                if attempt > policy.max_attempts:\n",
        ("tests/sync/test_http.py::test_retries_stop_after_max_attempts",),
    ),
    Mutant(
        "retry-after-beyond-budget-slept",  # Retry-After: inf was OverflowError, exit 5 "a bug"
        "exporter/api/client.py",
        "            if retry_after is not None and retry_after > self.retry.max_elapsed:\n",
        "            if False:\n",
        (
            "tests/sync/test_http.py::"
            "test_a_retry_after_longer_than_the_retry_budget_fails_the_request_at_once",
            "tests/ops/test_unexpected_error.py::"
            "test_a_retry_after_of_inf_fails_the_project_not_the_program",
        ),
    ),
    Mutant(
        "retry-after-not-a-number-waits-zero",  # nan or negative: a retry at once, no backoff
        "exporter/api/client.py",
        "    return seconds if seconds >= 0 else None  # nan compares false too\n",
        "    return max(0.0, seconds)\n",
        (
            "tests/sync/test_http.py::"
            "test_a_retry_after_that_is_not_a_number_of_seconds_falls_back_to_backoff",
        ),
    ),
    Mutant(
        "base-url-credentials-accepted",  # a password before the host taken and printed
        "exporter/api/client.py",
        '    if "@" in base_url:\n',
        "    if False:\n",
        (f"{STORAGE}::test_a_secret_in_the_base_url_is_refused_and_never_printed",),
    ),
    Mutant(
        "base-url-error-prints-it-whole",  # the error echoes a password or token as typed
        "exporter/api/client.py",
        '            f"--base-url {redact_url(base_url)!r} {problem}; expected something like {',
        '            f"--base-url {base_url!r} {problem}; expected something like {',
        (f"{STORAGE}::test_a_secret_in_the_base_url_is_refused_and_never_printed",),
    ),
    Mutant(
        "base-url-port-unchecked",  # http://host:abc was a ValueError: exit 5, "a bug"
        "exporter/api/client.py",
        "    if port == 0:\n",
        "    if False:\n",
        (f"{STORAGE}::test_bad_base_url_is_usage_error",),
    ),
    Mutant(
        "base-url-without-host-accepted",  # http://:8080 failed discovery as an unreachable API
        "exporter/api/client.py",
        "    if not parts.hostname:\n",
        "    if False:\n",
        (f"{STORAGE}::test_bad_base_url_is_usage_error",),
    ),
    Mutant(
        "float-option-takes-nan",  # --clock-offset nan: exit 5 "a bug"; --max-rps nan: no pacing
        "exporter/cli/_ops.py",
        "        if not math.isfinite(number):\n",
        "        if False:\n",
        ("tests/ops/test_cli_boundary.py::test_a_number_that_is_not_finite_is_a_usage_error",),
    ),
    Mutant(
        "discovery-falls-back-on-any-error",  # a failing server taken for another key kind
        "exporter/api/discovery.py",
        "            if exc.status is None or not 400 <= exc.status < 500:\n                raise\n",
        "",
        (
            "tests/sync/test_failures.py::"
            "test_a_failing_organizations_listing_is_no_reason_to_list_otherwise",
        ),
    ),
    Mutant(
        "lake-commits-every-empty-chunk",
        "exporter/store/lake/store.py",
        "if (table is None or not table.num_rows) and tag != _STATE_ONLY:",
        "if False:",
        ("tests/lake/test_requests.py::test_a_no_change_sync_makes_one_commit",),
    ),
    Mutant(
        "gcs-if-match-by-etag",  # object_store refuses an ETag alone on GCS: leases fail there
        "exporter/store/lake/objects.py",
        'mode = {"version": if_match} if self.location.scheme == "gs" else {"e_tag": if_match}',
        'mode = {"e_tag": if_match}',
        ("tests/lake/test_other_clouds.py::test_gcs_if_match_names_the_generation",),
    ),
    Mutant(
        "refresh-bounded-by-default",  # an exit-0 sync leaves open operations stale
        "exporter/engine/walk.py",
        "    max_gets: int | None = None  # single-operation GETs",
        "    max_gets: int | None = 500  # single-operation GETs",
        (f"{EXACT}::test_1_every_exit_0_sync_is_current_however_many_open_operations",),
    ),
    Mutant(
        "skip-idle-trusts-an-old-listing",  # issue 19 finding 1: --project P --skip-idle
        "exporter/store/state.py",
        '                "AND last_seen_us = ? "\n',
        '                "AND ? IS NOT NULL "\n',
        (f"{SKIP_IDLE}::test_skip_idle_leaves_only_projects_this_runs_listing_showed_idle",),
    ),
    Mutant(
        "skip-idle-compares-microseconds",  # finding 2: same-second activity read as idle
        "exporter/store/state.py",
        '                "AND (active_us / 1000000 + 1) * 1000000 + ? <= walked_from_us "\n',
        '                "AND active_us + 0 * ? < walked_from_us "\n',
        (f"{SKIP_IDLE}::test_skip_idle_walks_a_project_whose_activity_is_in_its_walks_own_second",),
    ),
    Mutant(
        "skip-idle-without-skew-margin",  # finding 2: this host's clock ahead of the API's
        "exporter/store/state.py",
        "IDLE_SKEW_US = 60_000_000\n",
        "IDLE_SKEW_US = 0\n",
        (f"{SKIP_IDLE}::test_skip_idle_allows_for_clock_skew",),
    ),
    Mutant(
        "help-imports-every-command",  # `opsaudit --help` ~20 ms slower (PRODUCT.md: <= 80 ms)
        "exporter/cli/_group.py",
        "        return sorted({*self.commands, *COMMANDS})\n",
        "        return sorted(n for n in {*self.commands, *COMMANDS} if self.get_command(ctx, n))\n",
        ("tests/ops/test_cli_boundary.py::test_help_lists_every_command_without_importing_one",),
    ),
    Mutant(
        "lake-package-loads-lease-and-objects",  # every reader's start-up ~3-5 ms slower
        "exporter/store/lake/__init__.py",
        "from exporter.store.lake.location import Location, parse_location, parse_storage_options, redact\n",
        "from exporter.store.lake.location import Location, parse_location, parse_storage_options, redact\n"
        "from exporter.store.lake.objects import objects_for  # noqa: F401\n",
        (
            "tests/test_import_costs.py::test_parsing_a_data_dir_loads_no_lease_or_object_store_code",
        ),
    ),
    Mutant(
        "query-defines-every-view",  # `query "select 1"` binds 15 views (~8 ms of start-up)
        "exporter/analytics/views.py",
        "        if names is None:\n            text = path.read_text()\n",
        "        if True:\n            text = path.read_text()\n",
        (
            "tests/analytics/test_query_views.py::"
            "test_a_connection_for_a_query_defines_only_what_it_needs",
        ),
    ),
    Mutant(
        "catalog-relations-see-only-named-views",  # FROM pg_views listed 14 of 29 views
        "exporter/analytics/views.py",
        '_CATALOG_PREFIXES = ("duckdb_", "pragma", "pg_", "sqlite_")\n',
        '_CATALOG_PREFIXES = ("duckdb_", "pragma")\n',
        (
            "tests/analytics/test_query_views.py::"
            "test_a_catalog_relation_without_a_catalog_word_sees_every_view",
        ),
    ),
    Mutant(
        "query-not-retried-over-every-view",  # query_table('sync_' || 'runs') a catalog error
        "exporter/cli/_query.py",
        "        if names is None or not is_missing_definition(exc):\n",
        "        if True:\n",
        (
            "tests/analytics/test_query_views.py::"
            "test_a_view_the_query_names_at_run_time_is_defined_on_a_second_try",
            "tests/analytics/test_cli.py::"
            "test_bad_sql_is_exit_7_with_duckdbs_whole_message_no_traceback",
        ),
    ),
    Mutant(
        "read-not-again-when-a-sync-deleted-a-file",  # exit 7 while a sync compacts
        "exporter/cli/_query.py",
        "            if reads == _READS or not is_file_gone(exc):\n",
        "            if True:\n",
        (
            "tests/sync/test_storage.py::"
            "test_a_command_reads_again_when_a_sync_deletes_a_file_it_named",
        ),
    ),
    Mutant(
        "read-again-without-bound",  # a file removed by hand: connections until the last one
        "exporter/cli/_query.py",
        "_READS = 3\n",
        "_READS = 4\n",
        (
            "tests/sync/test_storage.py::"
            "test_a_file_removed_by_hand_fails_the_query_after_three_connections",
        ),
    ),
    Mutant(
        "views-child-lock-not-inherited",  # a killed sync's child writes beside the next one's
        "exporter/analytics/views_db.py",
        "            pass_fds=() if lock_fd is None else (lock_fd,),\n",
        "            pass_fds=(),\n",
        (
            "tests/sync/test_views_refresh.py::"
            "test_a_sync_killed_while_its_child_writes_the_views_leaves_the_directory_locked",
        ),
    ),
    Mutant(
        "discovery-one-organization-fails-the-run",  # exit 5, nothing synced
        "exporter/api/discovery.py",
        "            failed.append(exc)\n",
        "            raise\n",
        (
            "tests/sync/test_exactness.py::"
            "test_4_one_organizations_failing_listing_makes_the_run_partial",
        ),
    ),
    Mutant(
        "discovery-no-organization-shared-not-listed",  # exit 0, operations missing
        "exporter/api/discovery.py",
        "        if listed_orgs:  # a personal key in no organization: others may share projects"
        " with it\n",
        "        if False:\n",
        (
            "tests/sync/test_exactness.py::"
            "test_a_personal_key_in_no_organization_syncs_the_projects_shared_with_it",
        ),
    ),
    Mutant(
        "unknown-project-never-forgotten",  # check exits 8 for ever after one typo
        "exporter/engine/sync.py",
        "        if found.whole_account:\n",
        "        if False:\n",
        (
            "tests/sync/test_unknown_project.py::test_a_mistyped_project_exits_1_named_and_check_flags_it",
        ),
    ),
    Mutant(
        "unknown-project-forgotten-by-one-organizations-run",  # not a listing of everything
        "exporter/api/discovery.py",
        "    found.whole_account = not org_ids and found.complete and not found.errors\n"
        "    _add_unavailable(found)\n",
        "    found.whole_account = True\n    _add_unavailable(found)\n",
        (
            "tests/sync/test_unknown_project.py::test_a_mistyped_project_exits_1_named_and_check_flags_it",
        ),
    ),
    Mutant(
        "freshness-of-the-freshest-dataset",  # a dataset whose sync stopped hides
        "exporter/analytics/report_figures.py",
        "        if stalest is None or _staler(entry, stalest):\n",
        "        if stalest is None or _staler(stalest, entry):\n",
        (
            "tests/sync/test_read_together.py::"
            "test_the_report_over_datasets_says_how_fresh_the_least_fresh_one_is",
        ),
    ),
    Mutant(
        "check-names-never-read-unseen",  # check ok while operations have no names
        "exporter/ops/check.py",
        "    for (pid,) in unnamed:\n",
        "    for (pid,) in []:\n",
        ("tests/ops/test_check.py::test_names_never_read_are_a_finding_once_older_than_max_age",),
    ),
    Mutant(
        "metrics-file-not-checked-before-the-run",  # exit 2 after a run that synced
        "exporter/cli/_metrics.py",
        "        callback=_metrics_folder_writable,\n",
        "",
        (
            "tests/ops/test_metrics.py::test_a_metrics_file_in_no_directory_is_refused_before_the_run",
        ),
    ),
    Mutant(
        "lock-held-by-a-dead-runs-helper-exits-4",  # the next run after a kill exits 4
        "exporter/store/state.py",
        "                taken = _holder_gone(fd) and _await_lock(fd, HELPERS_WAIT_S, stop)\n",
        "                taken = False\n",
        (
            "tests/sync/test_views_refresh.py::"
            "test_a_sync_killed_while_its_child_writes_the_views_leaves_the_directory_locked",
        ),
    ),
    Mutant(
        "killed-run-shown-running",  # status and doctor: running, while the lock is free
        "exporter/store/state.py",
        "    if not gone:\n        return runs\n",
        "    if True:\n        return runs\n",
        (
            "tests/sync/test_status.py::test_a_run_whose_process_is_gone_shows_as_killed_not_running",
        ),
    ),
    Mutant(
        "names-left-read-after-the-page",  # a short --time-budget never reads them
        "exporter/engine/walk.py",
        "            if self._names_left_before():\n",
        "            if False:\n",
        (
            "tests/sync/test_budget_runs.py::"
            "test_names_left_by_runs_cut_short_are_read_first_and_finish_under_a_short_time_budget",
        ),
    ),
    Mutant(
        "unexpected-error-escapes",  # finding 4: a traceback and exit 1 ("partial")
        "exporter/cli/_group.py",
        "    ctx.exit(int(ExitCode.FATAL))\n",
        "    raise error\n",
        ("tests/ops/test_unexpected_error.py::test_an_unexpected_error_exits_5_with_one_line",),
    ),
    Mutant(
        "follow-on-error-decides-the-exit-code",  # finding 6: a lost lease exits 6, not 4
        "exporter/engine/sync.py",
        "(e for e in failures if e is not None and not isinstance(e, _CommitterFailed)), None",
        "(e for e in failures if e is not None), None",
        ("tests/lake/test_lease_lost.py::test_a_lease_taken_over_mid_run_exits_4",),
    ),
    Mutant(
        "budget-below-listing-accepted",  # finding 10: exit 0 `budget`, nothing synced, for ever
        "exporter/engine/sync.py",
        "        if bound is not None and bound - found.listing_requests < NAMES_REQUESTS"
        " and found.ids:\n",
        "        if False:\n",
        ("tests/sync/test_budget_runs.py::test_a_request_budget_below_the_listing_is_refused",),
    ),
    Mutant(
        "budget-of-listing-and-a-page-accepted",  # every run walks, no project's names ever
        "exporter/engine/sync.py",
        "        if bound is not None and bound - found.listing_requests < NAMES_REQUESTS"
        " and found.ids:\n",
        "        if bound is not None and bound - found.listing_requests <= 0 and found.ids:\n",
        (
            "tests/sync/test_budget_runs.py::"
            "test_a_request_budget_of_the_listing_and_one_page_is_refused",
        ),
    ),
    Mutant(
        "names-listings-only-checked",  # the other walks' pages took the second one's request
        "exporter/engine/budget.py",
        "            if self.requests_left is not None:\n                self.requests_left -= n\n            return Reservation(self, n)\n",
        "            return Reservation(self, n)\n",
        (
            "tests/sync/test_budget_runs.py::"
            "test_a_reservation_is_taken_whole_and_gives_back_what_was_not_sent",
            "tests/sync/test_budget_runs.py::"
            "test_the_least_request_budget_completes_the_trail_with_concurrent_walks",
        ),
    ),
    Mutant(
        "reserved-requests-not-given-back",  # a failed first listing kept the second's request
        "exporter/engine/budget.py",
        "            self.budget._give_back(self.left)\n",
        "            pass\n",
        (
            "tests/sync/test_budget_runs.py::"
            "test_a_reservation_is_taken_whole_and_gives_back_what_was_not_sent",
        ),
    ),
    Mutant(
        "operations-404-taken-for-deletion",  # its open operations dropped, exit 0 for ever
        "exporter/engine/walk.py",
        "            self.client.get_project(self.pid)\n",
        '            raise NotFoundError("not asked")\n',
        (
            "tests/sync/test_failures.py::test_a_404_of_a_listed_projects_operations_is_no_deletion",
            "tests/sync/test_failures.py::"
            "test_a_404_in_a_project_run_is_a_deletion_only_when_the_project_answers_404_too",
        ),
    ),
    Mutant(
        "resumed-walk-refreshed-from-the-bottom",  # every open operation read by a GET
        "exporter/engine/walk.py",
        "        self.lowest = None\n",
        "",
        (
            "tests/sync/test_schedule.py::"
            "test_a_resumed_walk_extends_the_newest_walk_over_what_the_cut_run_read",
        ),
    ),
    Mutant(
        "retry-outlasts-the-time-budget",  # a 5 s --time-budget took 61 s under Retry-After
        "exporter/engine/sync.py",
        "        client.halt = self.budget.outlasted_by  # a retry's wait never outlasts the run\n",
        "",
        ("tests/sync/test_budget_runs.py::test_a_retry_never_waits_past_the_time_budget",),
    ),
    Mutant(
        "deadline-passed-without-the-budget-reached",  # outcome `ok` with a project left
        "exporter/engine/budget.py",
        "        with self._lock:\n            self.reached = True\n        return True\n",
        "        return True\n",
        (
            "tests/sync/test_budget_runs.py::test_a_retry_never_waits_past_the_time_budget",
            "tests/sync/test_budget_runs.py::"
            "test_a_reservation_is_taken_whole_and_gives_back_what_was_not_sent",
        ),
    ),
    Mutant(
        "vanished-projects-open-operations-dropped",  # back in the listing: old state for good
        "exporter/store/state.py",
        "            # Its tracked operations stay: a listing that shows it again (an API's moment, not\n",
        "            con.execute(\n"
        '                "DELETE FROM open_ops WHERE project_id IN "\n'
        '                "(SELECT id FROM projects WHERE deleted_us IS NOT NULL)"\n'
        "            )\n",
        (
            "tests/sync/test_failures.py::"
            "test_a_project_back_in_the_listing_has_its_open_operations_tracked_again",
        ),
    ),
    Mutant(
        "deleted-projects-open-operations-counted",  # open, planned and checked while gone
        "exporter/store/state.py",
        '_LISTED_PROJECT = "project_id NOT IN (SELECT id FROM projects WHERE deleted_us IS NOT NULL)"\n',
        '_LISTED_PROJECT = "1 = 1"\n',
        (
            "tests/sync/test_failures.py::"
            "test_a_project_back_in_the_listing_has_its_open_operations_tracked_again",
        ),
    ),
    Mutant(
        "killed-run-versions-not-counted",  # sync_runs: 0 versions beside the run's versions
        "exporter/store/state.py",
        '            else "(SELECT coalesce(sum(rows), 0) FROM files WHERE files.run_id = runs.run_id "\n',
        '            else "(SELECT 0 FROM files WHERE files.run_id = runs.run_id "\n',
        (
            "tests/sync/test_crash.py::"
            "test_a_killed_run_is_recorded_with_the_versions_its_commits_wrote",
        ),
    ),
    Mutant(
        "lake-killed-run-versions-not-counted",  # a Delta dataset's killed run: 0 versions
        "exporter/store/lake/store.py",
        "                self.state.count_written(con, self._run_id, table.num_rows)\n",
        "                pass\n",
        (
            "tests/lake/test_sync_lake.py::"
            "test_a_killed_run_on_s3_is_recorded_with_the_versions_its_commits_wrote",
        ),
    ),
    Mutant(
        "retry-wait-given-up-unsaid",  # a throttled run's early end read as a spent budget
        "exporter/engine/budget.py",
        "            self.wait_given_up = max(self.wait_given_up, seconds)\n",
        "            pass\n",
        (
            "tests/sync/test_budget_runs.py::"
            "test_a_run_ended_by_a_retry_after_past_its_budget_says_so",
        ),
    ),
    Mutant(
        "listed-object-without-id-taken",  # one id-less branch: every run of the account exit 5
        "exporter/engine/walk.py",
        '            if isinstance(o, dict) and isinstance(o.get("id"), str)  # else it names nothing\n',
        "            if isinstance(o, dict)\n",
        (f"{NAMES}::test_a_listed_object_without_a_usable_id_fails_nothing",),
    ),
    Mutant(
        "branch-newer-than-the-listings-unlisted",  # read before the walk: unnamed for good
        "exporter/engine/walk.py",
        "            self.chunk.unlisted |= met - late\n            if late:\n",
        "            self.chunk.unlisted |= met\n            if False:\n",
        (f"{NAMES}::test_a_branch_newer_than_listings_read_before_the_walk_is_listed_next_run",),
    ),
    Mutant(
        "listing-404-said-ok",  # names never read, run after run exit 0
        "exporter/engine/walk.py",
        "                except NotFoundError:\n                    self.names_error = self._listing_not_found()\n",
        "                except NotFoundError:\n                    pass\n",
        (f"{NAMES}::test_a_404_on_a_listing_is_no_deletion_and_leaves_the_names_due",),
    ),
    Mutant(
        "name-version-starts-before-the-last",  # a clock stepped back: spans overlap
        "exporter/store/state.py",
        "                version, start = before[0] + 1, max(now, before[2] + 1)\n",
        "                version, start = before[0] + 1, now\n",
        (f"{NAMES}::test_a_clock_stepped_back_keeps_name_versions_in_order",),
    ),
    Mutant(
        "names-age-behind-the-clock-not-due",  # --names-max-age 0 read nothing after a step back
        "exporter/engine/walk.py",
        "            or not 0 <= self.clock() - cp.names_read_us < self.names_max_age_us\n",
        "            or self.clock() - cp.names_read_us >= self.names_max_age_us\n",
        (f"{NAMES}::test_a_clock_stepped_back_keeps_name_versions_in_order",),
    ),
    Mutant(
        "lake-run-killed-before-commit-unrecorded",  # one row per sync: none for this one
        "exporter/store/lake/tables.py",
        "            state.add_run(run_id, started_us)\n",
        "            pass\n",
        (
            "tests/lake/test_sync_lake.py::"
            "test_a_run_killed_before_its_first_commit_on_s3_is_recorded",
        ),
    ),
    Mutant(
        "lake-reader-shows-killed-run-running",  # status: running until the next sync
        "exporter/store/lake/tables.py",
        "    state.mark_killed_runs(counted=True, live=live)\n",
        "    pass\n",
        (
            "tests/lake/test_sync_lake.py::"
            "test_a_killed_run_on_s3_is_recorded_with_the_versions_its_commits_wrote",
        ),
    ),
    Mutant(
        "deleted-projects-names-shown-live",  # its branches: deleted_at NULL for good
        "exporter/store/state.py",
        '            "n.last_seen_us, coalesce(n.deleted_us, p.deleted_us) FROM named n "\n',
        '            "n.last_seen_us, n.deleted_us FROM named n "\n',
        (f"{NAMES}::test_a_deleted_projects_branches_and_computes_show_its_deletion",),
    ),
    Mutant(
        "vanished-project-names-not-written-again",  # the tables keep the live rows
        "exporter/store/state.py",
        "                self._bump_names(con)  # their branches and computes show the deletion\n",
        "                pass\n",
        (f"{NAMES}::test_a_deleted_projects_branches_and_computes_show_its_deletion",),
    ),
    Mutant(
        "corrupt-lake-state-names-a-temporary-copy",  # advice nobody can follow
        "exporter/store/lake/tables.py",
        "        if not batch:\n            raise\n",
        "        raise\n",
        (
            "tests/lake/test_sync_lake.py::test_a_corrupt_state_object_is_named_not_its_temporary_copy",
        ),
    ),
    Mutant(
        "webhook-url-unencodable-target-accepted",  # exit 5 "a bug" at the first POST
        "exporter/events/webhook.py",
        "    if not target.isascii() or _UNSENDABLE.search(target):\n",
        "    if False:\n",
        (f"{WEBHOOK}::test_a_url_that_can_never_be_sent_is_a_usage_error",),
    ),
    Mutant(
        "webhook-url-bad-host-label-accepted",
        "exporter/events/webhook.py",
        "        unsendable = True\n",
        "        unsendable = False\n",
        (f"{WEBHOOK}::test_a_url_that_can_never_be_sent_is_a_usage_error",),
    ),
    Mutant(
        "webhook-url-bad-port-raises",  # exit 5 instead of 2
        "exporter/events/webhook.py",
        "        port = 0\n",
        "        raise\n",
        (f"{WEBHOOK}::test_a_url_that_can_never_be_sent_is_a_usage_error",),
    ),
    Mutant(
        "webhook-url-malformed-port-shown",  # the end of a password, printed
        "exporter/events/webhook.py",
        '    port = m["port"] if m["port"] and m["port"][1:].isdigit() else ""\n',
        '    port = m["port"] or ""\n',
        (f"{WEBHOOK}::test_a_url_that_can_never_be_sent_is_a_usage_error",),
    ),
    Mutant(
        "webhook-unencodable-attempt-crashes-run",
        "exporter/events/delivery.py",
        "        except (OSError, http.client.HTTPException, ValueError) as exc:\n",
        "        except (OSError, http.client.HTTPException) as exc:\n",
        (f"{WEBHOOK}::test_a_library_url_that_cannot_be_sent_fails_its_attempts_not_the_run",),
    ),
    Mutant(
        "webhook-watchdog-never-shuts",  # an answer trickled a byte a second held an attempt 37 s
        "exporter/core/watchdog.py",
        "                                socket.socket.shutdown(watch.sock, socket.SHUT_RDWR)\n",
        "                                pass\n",
        (
            f"{WEBHOOK}::test_webhook_timeout_bounds_a_whole_attempt_not_each_read",
            "tests/sync/test_http.py::"
            "test_an_answer_trickled_a_byte_at_a_time_is_cut_at_the_attempts_bound",
        ),
    ),
    Mutant(
        "listing-without-created-at-wipes-it",  # branches.created_at NULL after one odd listing
        "exporter/store/state.py",
        '                "created_us = coalesce(excluded.created_us, named.created_us), "\n',
        '                "created_us = excluded.created_us, "\n',
        (f"{NAMES}::test_a_listing_that_lost_when_and_by_whom_keeps_what_was_known",),
    ),
    Mutant(
        "doctor-views-path-spliced",  # a quote in the path: a warning no sync can fix
        "exporter/ops/doctor.py",
        '            con.execute("SET file_search_path = ?", [seen.as_posix()])\n',
        "            con.execute(f\"SET file_search_path = '{seen.as_posix()}'\")\n",
        ("tests/ops/test_doctor.py::test_views_answer_from_a_data_dir_whose_path_has_a_quote",),
    ),
    Mutant(
        "failon-zero-window-accepted",  # a threshold that can never fire
        "exporter/ops/check.py",
        "    if not duration:\n",
        "    if duration < dt.timedelta(0):\n",
        (
            "tests/ops/test_check.py::test_threshold_parser",
            "tests/ops/test_check.py::test_bad_arguments_are_usage_errors",
        ),
    ),
    Mutant(
        "metrics-events-backlog-no-zero",  # an alert sees the series absent, not 0
        "exporter/ops/check.py",
        '    "threshold",\n    "events_backlog",\n]\n',
        '    "threshold",\n]\n',
        (
            "tests/ops/test_metrics.py::test_check_metrics_file_failures_per_action",
            "tests/ops/test_metrics.py::test_every_finding_kind_check_emits_is_declared_once",
        ),
    ),
    Mutant(
        "lake-option-bad-boolean-passed",  # exit 6, the value printed back
        "exporter/store/lake/location.py",
        "    if bare in _BOOLEAN_OPTIONS and option_bool(value) is None:\n",
        "    if False:\n",
        (
            "tests/lake/test_bad_input.py::"
            "test_a_bad_option_value_is_a_usage_error_that_does_not_show_it",
        ),
    ),
    Mutant(
        "odd-id-newer-than-the-listings-unhashable",  # exit 5: unhashable type 'dict'
        "exporter/engine/walk.py",
        "                if isinstance(i, str) and i in met  # an odd id (a JSON object) is unhashable\n",
        "                if i in met\n",
        (f"{NAMES}::test_an_odd_id_on_an_operation_newer_than_the_listings_fails_nothing",),
    ),
    Mutant(
        "newer-lake-state-called-corrupt",  # "restore a backup" where "upgrade" is the fix
        "exporter/store/lake/tables.py",
        "    except UnreadableStateError:\n",
        "    except StorageError:\n",
        (
            "tests/lake/test_sync_lake.py::"
            "test_readers_tell_a_newer_state_and_an_unreadable_lease_from_a_corrupt_state",
        ),
    ),
    Mutant(
        "unreadable-lease-fails-the-readers",  # status exit 2 on one refused GET of the lease
        "exporter/store/readers.py",
        "    except Exception as exc:  # the object store's moment: the runs are shown as committed\n",
        "    except ValueError as exc:\n",
        (
            "tests/lake/test_sync_lake.py::"
            "test_readers_tell_a_newer_state_and_an_unreadable_lease_from_a_corrupt_state",
        ),
    ),
    Mutant(
        "lease-renewals-race",  # the heartbeat and note_run: the loser reads a takeover
        "exporter/store/lake/lease.py",
        "        with self._renewing:\n",
        "        with contextlib.nullcontext():\n",
        (
            "tests/lake/test_lease.py::"
            "test_naming_the_run_while_the_heartbeat_renews_never_loses_the_lease",
        ),
    ),
    Mutant(
        "timestamptz-infinity-printed-as-an-instant",
        "exporter/analytics/views.py",
        "    return _infinities(rows, zoned) if zoned else rows\n",
        "    return rows\n",
        ("tests/analytics/test_format.py::test_infinite_timestamps_print_as_duckdb_spells_them",),
    ),
    Mutant(
        "webhook-userinfo-with-a-slash-shown",  # the tail of a base64 password printed
        "exporter/events/webhook.py",
        '    if sep and "@" in authority:\n',
        "    if False:\n",
        (f"{WEBHOOK}::test_a_url_that_can_never_be_sent_is_a_usage_error",),
    ),
    Mutant(
        "budget-late-wait-reported",  # "gave up a retry's wait of 0.0s" of a spent budget
        "exporter/engine/budget.py",
        "        if self.deadline is not None and before < self.deadline:  # the wait is what passes it\n",
        "        if True:\n",
        (
            "tests/sync/test_budget_runs.py::test_only_a_wait_that_passes_the_deadline_is_reported_given_up",
        ),
    ),
    Mutant(
        "storage-option-control-character-passed",  # a value's first line in obstore's error
        "exporter/store/lake/location.py",
        '    if any(c < " " or c == "\\x7f" for c in value):\n',
        "    if False:\n",
        (
            "tests/lake/test_bad_input.py::"
            "test_a_bad_option_value_is_a_usage_error_that_does_not_show_it",
        ),
    ),
    Mutant(
        "undocumented-events-filter-silent",  # status=faild left every event out, unsaid
        "exporter/cli/_sync.py",
        "            if unknown:\n",
        "            if False:\n",
        (
            "tests/ops/test_cli_boundary.py::"
            "test_an_events_filter_value_the_api_does_not_document_warns",
        ),
    ),
    Mutant(
        "directory-config-read-beside-the-named-one",  # a broken ./opsaudit.toml failed it
        "exporter/cli/__init__.py",
        "        if own_config and (config_file is None or from_env):\n",
        "        if False:\n",
        ("tests/ops/test_cli_boundary.py::test_config_after_the_command_as_before_it",),
    ),
    Mutant(
        "decimals-rounded-to-floats",  # 12345678901234567.89 printed as 1.2345678901234568e+16
        "exporter/analytics/format.py",
        '        return number if exact else orjson.Fragment(format(value, "f"))\n',
        "        return number\n",
        ("tests/analytics/test_format.py::test_a_decimal_a_float_cannot_hold_is_written_exactly",),
    ),
    Mutant(
        "ctrl-c-twice-recorded-as-failed",  # sync_runs: failed, "KeyboardInterrupt"
        "exporter/engine/sync.py",
        "        if summary.outcome is Outcome.RUNNING and isinstance(failure, KeyboardInterrupt):\n",
        "        if False:\n",
        (
            "tests/sync/test_interrupt.py::"
            "test_ctrl_c_while_listing_is_recorded_as_interrupted_not_failed[twice-interrupted (Ctrl-C twice)]",
        ),
    ),
    Mutant(
        "budget-ending-in-the-listing-exits-5",  # "interrupted while listing", no signal came
        "exporter/engine/sync.py",
        '            if self.stop.is_set():\n                summary.outcome, summary.error = Outcome.INTERRUPTED, "interrupted while listing"\n',
        '            if True:\n                summary.outcome, summary.error = Outcome.INTERRUPTED, "interrupted while listing"\n',
        (
            "tests/sync/test_budget_runs.py::"
            "test_a_time_budget_ending_in_the_listing_is_a_budget_outcome",
        ),
    ),
    Mutant(
        "listing-retries-counted-in-the-least-budget",  # refused after one 503, naming another
        "exporter/engine/sync.py",
        "        if bound is not None and bound - found.listing_requests < NAMES_REQUESTS"
        " and found.ids:\n",
        "        if bound is not None and bound - client.stats.requests < NAMES_REQUESTS"
        " and found.ids:\n",
        (
            "tests/sync/test_budget_runs.py::"
            "test_the_listings_retries_do_not_count_against_the_least_request_budget",
        ),
    ),
    Mutant(
        "first-claims-raced",  # a walk started later took the stalest project's requests
        "exporter/engine/walk.py",
        "            turn.wait(self.cancel)\n",
        "            pass\n",
        (
            "tests/sync/test_budget_runs.py::"
            "test_walks_claim_a_bounded_budget_in_the_order_they_were_started",
        ),
    ),
    Mutant(
        "budget-runs-never-fresh",  # finding 5: stale_sync for ever after budgeted runs
        "exporter/core/model.py",
        "            if not decided and oldest is not None:\n",
        "            if False:\n",
        (
            "tests/sync/test_budget_runs.py::test_budgeted_runs_count_as_fresh_once_every_project_is_walked",
        ),
    ),
    Mutant(
        "budget-runs-not-synced",  # finding 5: retention_gap ignores budgeted runs
        "exporter/ops/check.py",
        "SYNCED_OUTCOMES = (Outcome.OK, Outcome.PARTIAL, Outcome.BUDGET, Outcome.INTERRUPTED)",
        "SYNCED_OUTCOMES = (Outcome.OK, Outcome.PARTIAL)",
        (
            "tests/sync/test_budget_runs.py::test_budgeted_runs_count_as_fresh_once_every_project_is_walked",
        ),
    ),
    Mutant(
        "unknown-project-taken-for-deleted",  # finding 14: a mistyped --project is green
        "exporter/engine/walk.py",
        "        if not self.cp.seen:\n",
        "        if False:\n",
        (
            "tests/sync/test_unknown_project.py::test_a_mistyped_project_exits_1_named_and_check_flags_it",
        ),
    ),
    Mutant(
        "unknown-project-alone-exits-5",  # finding 14: exit 1, named, not "nothing synced"
        "exporter/engine/sync.py",
        "            and self.projects_total > self.projects_unknown\n",
        "            and self.projects_total > 0\n",
        (
            "tests/sync/test_unknown_project.py::test_a_mistyped_project_exits_1_named_and_check_flags_it",
        ),
    ),
    Mutant(
        "interrupted-run-recorded-as-finished",  # finding 15: outcome and exit code say ok
        "exporter/engine/sync.py",
        "            summary.outcome = Outcome.INTERRUPTED  # what was read is committed; no compaction\n",
        "            pass\n",
        ("tests/sync/test_interrupt.py",),
    ),
    Mutant(
        "query-runs-several-statements",  # DuckDB would run them all and show only the last
        "exporter/analytics/views.py",
        "    if single and len(statements) > 1:\n",
        "    if False:\n",
        (
            "tests/analytics/test_cli.py::"
            "test_query_several_statements_are_refused_not_the_last_shown",
        ),
    ),
    Mutant(
        "query-table-not-capped",
        "exporter/analytics/format.py",
        "    if max_rows is not None and len(rows) > max_rows:\n",
        "    if False:\n",
        (
            "tests/analytics/test_cli.py::test_query_table_caps_rows_and_says_how_many_more",
            "tests/analytics/test_format.py::test_the_table_shows_max_rows_of_the_rows_it_is_given",
        ),
    ),
    Mutant(
        "views-db-newest-storage",  # the DuckDB CLI releases on PyPI cannot open the file
        "exporter/analytics/views.py",
        '                    "" if files_only else f" (STORAGE_VERSION {_quote(VIEWS_DB_STORAGE_VERSION)})"\n',
        '                    ""\n',
        ("tests/analytics/test_views_db.py::test_views_database_opens_in_the_duckdb_cli",),
    ),
    Mutant(
        "views-db-absolute-paths",  # a copied or moved data directory's views fail
        "exporter/analytics/views.py",
        "            sources = _derive_missing(local_sources(data_dir, relative=True))\n",
        "            sources = _derive_missing(local_sources(data_dir))\n",
        (
            "tests/analytics/test_views_db.py::"
            "test_views_database_keeps_working_after_the_directory_is_moved",
        ),
    ),
    Mutant(
        "events-outbox-after-commit",  # a kill between the two commits loses events
        "exporter/engine/sync.py",
        "            if outbox is not None:\n"
        "                # In the transaction that commits the rows: the outbox (issue 22).\n"
        "                recorded[0] = outbox.record(con, events, now, self.run_id)\n"
        "\n"
        '        done = self.dataset.commit(table, f"{self.run_id}-{self._seq:05d}", '
        "self.run_id, apply)\n",
        "\n"
        '        done = self.dataset.commit(table, f"{self.run_id}-{self._seq:05d}", '
        "self.run_id, apply)\n"
        "        if outbox is not None:\n"
        "            with state.transaction() as after:\n"
        "                recorded[0] = outbox.record(after, events, now, self.run_id)\n",
        (f"{EVENTS}::test_kill_right_after_the_commit_loses_no_event",),
    ),
    Mutant(
        "events-names-not-filled",  # events say null where the branch's name is known
        "exporter/events/outbox.py",
        "    return event_lines_buffer(table, _run_names(projects), branches, endpoints)\n",
        "    return event_lines_buffer(table, _run_names(projects))\n",
        (f"{EVENTS}::test_one_event_per_new_version_after_the_backfill",),
    ),
    Mutant(
        "events-built-from-rows-out-of-order",  # the webhook gets another event's body
        "exporter/events/outbox.py",
        "        return _lines(found.take(index), f.projects, f.branches, f.endpoints).to_pybytes()\n",
        "        return _lines(found, f.projects, f.branches, f.endpoints).to_pybytes()\n",
        (f"{EVENTS}::test_events_built_at_delivery_are_the_bytes_built_at_commit",),
    ),
    Mutant(
        "events-facts-names-dropped",  # built at delivery, the events say null for the names
        "exporter/events/outbox.py",
        "                facts = _FACTS.encode(_Facts(run_id, runs, part_branches, part_endpoints))\n",
        "                facts = _FACTS.encode(_Facts(run_id, runs, [None] * n, [None] * n))\n",
        (f"{EVENTS}::test_one_event_per_new_version_after_the_backfill",),
    ),
    Mutant(
        "events-facts-not-migrated",  # a format 8 state: the outbox cannot be read
        "exporter/store/state.py",
        '                _execute_once(con, "ALTER TABLE event_batches ADD COLUMN facts BLOB")\n',
        "                pass\n",
        (f"{EVENTS}::test_pending_events_of_a_format_8_state_are_delivered_as_recorded",),
    ),
    Mutant(
        "events-names-one-per-id",  # after a rename, new operations say the branch's old name
        "exporter/events/outbox.py",
        "            if len(versions) > 1 or (versions and versions[0][1] is not None):\n",
        "            if False:\n",
        (f"{NAMES}::test_events_carry_the_name_in_effect_when_the_operation_was_created",),
    ),
    Mutant(
        "events-names-read-after-the-walk",  # a branch first listed in the run: events say null
        "exporter/engine/walk.py",
        "            if names and not self.names_tried and self._names_wanted():\n",
        "            if False:\n",
        (
            f"{EVENTS}::test_a_branch_first_listed_in_the_same_run_names_its_events",
            f"{EVENTS}::test_events_backfill_emits_the_first_walk",
        ),
    ),
    Mutant(
        "events-names-applied-after-the-events",  # the chunks' own listings come too late
        "exporter/engine/sync.py",
        "                state.apply_names(con, c)\n"
        "                if outbox is not None:\n"
        "                    events.extend(outbox.select(con, c.project_id, c.events))\n"
        "                state.apply_chunk(con, c)\n"
        "            if outbox is not None:\n"
        "                # In the transaction that commits the rows: the outbox (issue 22).\n"
        "                recorded[0] = outbox.record(con, events, now, self.run_id)\n",
        "                if outbox is not None:\n"
        "                    events.extend(outbox.select(con, c.project_id, c.events))\n"
        "                state.apply_chunk(con, c)\n"
        "            if outbox is not None:\n"
        "                recorded[0] = outbox.record(con, events, now, self.run_id)\n"
        "            for c in chunks:\n"
        "                state.apply_names(con, c)\n",
        (
            f"{EVENTS}::test_a_branch_first_listed_in_the_same_run_names_its_events",
            f"{EVENTS}::test_events_backfill_emits_the_first_walk",
        ),
    ),
    Mutant(
        "names-unlisted-after-the-listing-lost",  # a deleted branch's id stays unknown
        "exporter/engine/walk.py",
        "            self.chunk.unlisted |= met - late\n",
        "            pass\n",
        (f"{NAMES}::test_every_named_id_is_known_after_the_first_walk",),
    ),
    Mutant(
        "events-file-followed-before-the-backlog",  # new events overtake the waiting ones
        "exporter/events/follower.py",
        "            self.delivered += deliver_file(self.outbox, self.path)\n",
        "            pass\n",
        (f"{EVENTS}::test_a_backlog_reaches_the_file_before_the_new_events",),
    ),
    Mutant(
        "events-delivery-alongside-not-awaited",  # the run returns before its delivery is done
        "exporter/engine/sync.py",
        "        return _join_through_ctrl_c(delivery.ended.wait, delivery.stop)\n",
        "        return None\n",
        (f"{EVENTS}::test_the_run_returns_once_its_delivery_alongside_the_record_is_done",),
    ),
    Mutant(
        # A second Ctrl-C while the run is recorded: the dataset closes (its lock released)
        # with the delivery still writing the events file and the state.
        "events-delivery-abandoned-when-the-record-is-interrupted",
        "exporter/engine/sync.py",
        "        except BaseException as exc:  # Ctrl-C again: raised once the delivery ended\n"
        "            finish_error = exc\n",
        "",
        (f"{EVENTS}::test_a_second_ctrl_c_awaits_a_delivery_that_does_not_stop_at_once[record]",),
    ),
    Mutant(
        "events-delivery-await-ended-by-ctrl-c",  # the same, a Ctrl-C while it is awaited
        "exporter/engine/sync.py",
        "            join()\n            return interrupted\n",
        "            join()\n            return None\n",
        (f"{EVENTS}::test_a_second_ctrl_c_awaits_a_delivery_that_does_not_stop_at_once[await]",),
    ),
    Mutant(
        "events-delivery-await-by-thread-join",  # CPython 3.11: a Ctrl-C in a join ends it
        "exporter/engine/sync.py",
        "        return _join_through_ctrl_c(delivery.ended.wait, delivery.stop)\n",
        "        return _join_through_ctrl_c(delivery.join, delivery.stop)\n",
        (f"{EVENTS}::test_a_second_ctrl_c_awaits_a_delivery_that_does_not_stop_at_once[await]",),
    ),
    # The events file's appends in a child process (issue 22): marked only once it answered,
    # the lock held while it appends.
    Mutant(
        "events-child-pieces-skip-events",  # the child is sent all but an event per piece
        "exporter/events/outbox.py",
        "        return [self._piece_rows(rows, names, s) for s in range(0, rows.num_rows, PIECE_EVENTS)]\n",
        "        return [self._piece_rows(rows, names, s) for s in range(0, rows.num_rows, PIECE_EVENTS + 1)]\n",
        (f"{APPENDER}::test_the_childs_appends_are_the_bytes_built_at_delivery",),
    ),
    Mutant(
        "events-child-answer-not-awaited",  # events marked delivered that never reached the file
        "exporter/events/follower.py",
        "                self._child.ack()\n",
        "                pass\n",
        (f"{APPENDER}::test_a_child_killed_mid_run_leaves_the_file_to_the_end_of_run_delivery",),
    ),
    Mutant(
        "events-child-lock-not-inherited",  # a next run may repair the tail while it appends
        "exporter/events/appender.py",
        "            pass_fds=(lock_fd,),\n",
        "            pass_fds=(),\n",
        (f"{APPENDER}::test_a_sync_killed_during_the_childs_append_then_a_healthy_run",),
    ),
    # A second Ctrl-C during the run's last commit: the lock is held until that commit ended.
    Mutant(
        "lock-released-during-an-aborted-commit",  # another run may start beside the commit
        "exporter/engine/sync.py",
        "            run.committer.when_ended(dataset.close)\n",
        "            dataset.close()\n",
        (LAST_COMMIT,),
    ),
    Mutant(
        "lock-released-during-an-aborted-runs-last-append",  # events file written unlocked
        "exporter/engine/sync.py",
        "                _quietly(self.follower.wait)\n                self.follower.close()\n",
        "                pass\n",
        (LAST_COMMIT + "[True]",),
    ),
    Mutant(
        "abort-waits-for-the-last-commit",  # a second Ctrl-C not at once
        "exporter/engine/sync.py",
        "            if committer.running and not aborted:\n",
        "            if committer.running:\n",
        (LAST_COMMIT,),
    ),
    Mutant(
        "events-delivery-failure-alongside-not-raised",  # exit 0 with the outbox unreadable
        "exporter/engine/sync.py",
        "exc)\n        delivery.raise_failure()\n",
        "exc)\n",
        (
            f"{EVENTS}::test_a_committed_file_gone_while_events_wait_is_a_storage_error_then_"
            "delivered",
        ),
    ),
    Mutant(
        "events-delivery-failure-alongside-not-recorded",  # the run's record says ok
        "exporter/engine/sync.py",
        "            self._finish(self.summary)  # the exported sync_runs said ok: they are "
        "rewritten\n",
        "            pass\n",
        (
            f"{EVENTS}::test_a_committed_file_gone_while_events_wait_is_a_storage_error_then_"
            "delivered",
        ),
    ),
    Mutant(
        "events-file-last-append-not-awaited",  # the end-of-run delivery races the last append
        "exporter/engine/sync.py",
        "            committer.follower.finish()\n",
        "            pass\n",
        (
            f"{EVENTS}::test_events_backfill_emits_the_first_walk",
            f"{EVENTS}::test_the_run_returns_once_its_delivery_alongside_the_record_is_done",
        ),
    ),
    Mutant(
        "events-file-follower-mark-lost",  # followed appends are appended again at the end
        "exporter/engine/sync.py",
        "                follower.mark(con)  # the previous commit's events, appended to the file "
        "since\n",
        "                pass\n",
        (
            f"{EVENTS}::test_events_backfill_emits_the_first_walk",
            f"{EVENTS}::test_kill_9_at_random_instants_then_a_healthy_run",
        ),
    ),
    Mutant(
        "events-json-escape-check-narrowed",  # a quote or backslash alone is not escaped
        "exporter/events/render.py",
        "_ESCAPED = b'\"\\\\' + bytes(range(0x20))  # what a JSON string literal cannot hold as is\n",
        "_ESCAPED = bytes(range(0x20))\n",
        (f"{EVENTS}::test_event_json_escapes_every_string_field",),
    ),
    Mutant(
        "events-json-ids-inlined-unescaped",  # an id with a quote breaks the event's JSON
        "exporter/events/render.py",
        '        if plain_ids and table["id"].null_count == 0:  # the versions go inside the ids\' quotes\n',
        "        if True:\n",
        (f"{EVENTS}::test_event_json_escapes_every_string_field",),
    ),
    Mutant(
        "events-file-piece-names-misaligned",  # a piece's events get the first piece's names
        "exporter/events/outbox.py",
        "        project, branch, endpoint = (a.slice(start, PIECE_EVENTS) for a in names)\n",
        "        project, branch, endpoint = (a.slice(0, PIECE_EVENTS) for a in names)\n",
        (f"{EVENTS}::test_a_commit_of_many_events_is_recorded_in_bounded_outbox_rows",),
    ),
    Mutant(
        "events-file-pieces-skip-events",  # the file misses an event after each piece
        "exporter/events/outbox.py",
        "        return [functools.partial(piece, s) for s in range(0, rows.num_rows, PIECE_EVENTS)]\n",
        "        return [functools.partial(piece, s) for s in range(0, rows.num_rows, PIECE_EVENTS + 1)]\n",
        (f"{EVENTS}::test_a_commit_of_many_events_is_recorded_in_bounded_outbox_rows",),
    ),
    Mutant(
        "events-json-group-key-drops-a-column",  # events of one action get another's status
        "exporter/events/render.py",
        "        key = indices if key is None else pc.add(pc.multiply(key, size), indices)\n",
        "        key = indices\n",
        (RENDER,),
    ),
    Mutant(
        "events-json-group-literals-dropped",  # the text between two grouped fields is lost
        "exporter/events/render.py",
        "            after += following\n",
        "            pass\n",
        (RENDER,),
    ),
    Mutant(
        "events-json-fractions-cast-as-seconds",  # a column of some whole seconds loses the rest
        "exporter/events/render.py",
        "    if pc.all(whole).as_py() is True:\n",
        "    if pc.any(whole).as_py() is True:\n",
        (RENDER,),
    ),
    Mutant(
        "events-retry-removed",  # one failed attempt leaves the event for the next run
        "exporter/events/delivery.py",
        "        attempts = max(1, self.config.webhook_attempts)\n",
        "        attempts = 1\n",
        (f"{EVENTS}::test_webhook_retries_failures_hangs_and_drops_within_the_run",),
    ),
    Mutant(
        "events-torn-line-repair-removed",  # the next line is glued to half a line
        "exporter/events/eventsfile.py",
        "        os.ftruncate(fd, keep)\n",
        "        pass\n",
        (f"{EVENTS}::test_torn_last_line_is_repaired",),
    ),
    Mutant(
        "events-file-reconcile-removed",  # lines appended before a kill are appended again
        "exporter/events/delivery.py",
        "            if seq is not None:\n",
        "            if False:\n",
        (f"{EVENTS}::test_kill_after_append_before_the_mark_does_not_repeat_lines",),
    ),
    Mutant(
        "data-dir-file-accepted",  # sync exit 6, readers "does not exist"
        "exporter/core/pathcheck.py",
        '    return None if stat.S_ISDIR(mode) else f"{_shown(text)} is a file, not a directory"\n',
        "    return None\n",
        (
            "tests/ops/test_cli_boundary.py::test_a_data_dir_that_is_a_file_is_exit_2_for_every_command",
        ),
    ),
    Mutant(
        "not-a-dataset-read-as-empty",  # --data-dir ~ answers every query with 0 rows
        "exporter/store/readers.py",
        "            if error is not None:\n",
        "            if False:\n",
        ("tests/ops/test_cli_boundary.py::test_a_directory_that_is_not_a_dataset_is_exit_2",),
    ),
    Mutant(
        "report-stuck-counts-failing-twice",  # issue 23: 1,988 of 3,194 "stuck" were failed
        "sql/90_report.sql",
        "    NOT is_terminal(status) AND NOT is_failing(status)\n",
        "    NOT is_terminal(status)\n",
        (
            "tests/analytics/test_report_headline.py::test_headline_of_the_fixed_dataset",
            "tests/analytics/test_report_headline.py::test_on_call_tables_of_the_fixed_dataset",
        ),
    ),
    Mutant(
        "report-groups-superseded-not-subtracted",  # issue 24: counts of every version
        "sql/90_report.sql",
        "    SELECT project_id, branch_id, action, failures_count, status\n"
        "    FROM query_table(rows)\n    WHERE superseded\n",
        "    SELECT project_id, branch_id, action, failures_count, status\n"
        "    FROM query_table(rows)\n    WHERE false\n",
        ("tests/analytics/test_cli.py::test_report_json",),
    ),
    Mutant(
        "report-groups-in-superseded-not-subtracted",  # the same, from the summary record
        "sql/90_report.sql",
        "        -coalesce(failures_count, 0), 0\n    FROM query_table(rows)\n    WHERE superseded\n",
        "        -coalesce(failures_count, 0), 0\n    FROM query_table(rows)\n    WHERE false\n",
        (
            f"{REPORT_SUMMARY}::"
            "test_per_action_figures_when_a_finished_version_was_superseded[summary]",
        ),
    ),
    Mutant(
        "report-problems-superseded-listed",  # issue 24: a running version after it finished
        "sql/90_report.sql",
        "WHERE NOT superseded AND (is_failing(status)\n",
        "WHERE (is_failing(status)\n",
        ("tests/analytics/test_report_headline.py::test_on_call_tables_of_the_fixed_dataset",),
    ),
    Mutant(
        "report-json-datetimes-unconverted",  # issue 24: orjson's +00:00, not jsonable's Z
        "exporter/analytics/format.py",
        "_JSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS\n",
        "_JSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS\n",
        (
            "tests/analytics/test_format.py::test_json_bytes_writes_what_jsonable_gives",
            "tests/analytics/test_cli.py::test_report_json",
        ),
    ),
    Mutant(
        "report-by-action-never-falls-back",  # issue 24: every version taken for the latest
        "exporter/analytics/report_figures.py",
        '    if not all([r.pop("exact") for r in records]):\n',
        '    if not [r.pop("exact") for r in records]:\n',
        (
            "tests/analytics/test_report.py::"
            "test_per_action_figures_when_a_finished_version_was_superseded",
            "tests/analytics/test_report.py::"
            "test_first_created_at_when_only_a_superseded_version_held_it",
        ),
    ),
    Mutant(
        "report-by-action-terminal-superseded-ignored",
        "sql/90_report.sql",
        "        coalesce(g.terminal, 0) = 0\n            AND coalesce(e.firsts",
        "        true\n            AND coalesce(e.firsts",
        (
            "tests/analytics/test_report.py::"
            "test_per_action_figures_when_a_finished_version_was_superseded",
        ),
    ),
    Mutant(
        "report-by-action-first-created-unchecked",
        "sql/90_report.sql",
        "            AND coalesce(e.firsts[1 + coalesce(\n",
        "            AND true OR coalesce(e.firsts[1 + coalesce(\n",
        (
            "tests/analytics/test_report.py::"
            "test_first_created_at_when_only_a_superseded_version_held_it",
        ),
    ),
    # The report's summary record (issue 24): written with each commit, merged, migrated once.
    Mutant(
        "summary-not-written-at-commit",  # a commit of rows not written ahead (lake, events)
        "exporter/store/local/dataset.py",
        "                    summary, SUMMARY_DIR, _summary_partition(partition), SUMMARY_SCHEMA, tag\n",
        "                    summary[:0], SUMMARY_DIR, _summary_partition(partition), SUMMARY_SCHEMA, tag\n",
        (f"{SUMMARY}::test_quantiles_from_the_histograms_are_quantile_cont_to_the_last_bit",),
    ),
    Mutant(
        "summary-of-rows-written-ahead-dropped",  # a backfill's rows go through spill()
        "exporter/store/local/dataset.py",
        "            self._summary_waiting.append(table.select(SUMMARY_COLUMNS))\n",
        "            pass\n",
        (f"{SUMMARY}::test_each_commit_records_the_summary_of_its_versions",),
    ),
    Mutant(
        "summary-migration-writes-nothing",  # an old dataset marked summarised, empty
        "exporter/store/local/summary.py",
        "                summaries.append(summary_of(pa.Table.from_batches([batch])))\n",
        "                pass\n",
        (
            f"{SUMMARY}::"
            "test_a_dataset_written_before_the_record_reports_the_same_after_its_migration",
        ),
    ),
    Mutant(
        "summary-migration-in-one-piece",  # the whole history's summary held at once (~1 GB/10M)
        "exporter/store/local/dataset.py",
        "        months.setdefault(path.parent.name, []).append(path)\n",
        '        months.setdefault("created_month=all", []).append(path)\n',
        (
            f"{SUMMARY}::"
            "test_a_dataset_written_before_the_record_reports_the_same_after_its_migration",
        ),
    ),
    Mutant(
        "summary-merge-forgets-earlier-rows",  # each merge step drops what the last ones merged
        "exporter/store/local/summary.py",
        "            previous = [merged[kind]] if kind in merged else []\n",
        "            previous = []\n",
        (f"{SUMMARY}::test_compaction_merges_the_summary_and_keeps_its_sums",),
    ),
    Mutant(
        "summary-merge-kind-shape-unchecked",  # a value where its kind has none: lost, unseen
        "exporter/store/local/summary.py",
        "        if any(rows[column].null_count != rows.num_rows for column in dropped):\n",
        "        if False:\n",
        (f"{SUMMARY}::test_the_merge_keeps_each_kind_of_row_in_its_columns_and_refuses_others",),
    ),
    Mutant(
        "summary-merge-kind-loses-its-action",  # merged rows written without their action
        "exporter/store/local/summary.py",
        "    constants = dict(zip(_CONSTANTS, (measure, action), strict=True))\n",
        "    constants = dict(zip(_CONSTANTS, (measure, None), strict=True))\n",
        (
            f"{SUMMARY}::test_compaction_merges_the_summary_and_keeps_its_sums",
            f"{SUMMARY}::test_the_merge_keeps_each_kind_of_row_in_its_columns_and_refuses_others",
        ),
    ),
    Mutant(
        "summary-merge-histograms-across-ms",  # a histogram's counts summed over durations
        "exporter/store/local/summary.py",
        '_HISTOGRAM_KEYS = ["month", "ms"]\n',
        '_HISTOGRAM_KEYS = ["month"]\n',
        (
            f"{SUMMARY}::test_compaction_merges_the_summary_and_keeps_its_sums",
            f"{SUMMARY}::test_the_merge_keeps_each_kind_of_row_in_its_columns_and_refuses_others",
        ),
    ),
    Mutant(
        "summary-merge-across-months",  # compaction would sum months into one another
        "exporter/store/local/summary.py",
        '_HISTOGRAM_KEYS = ["month", "ms"]\n',
        '_HISTOGRAM_KEYS = ["ms"]\n',
        (f"{SUMMARY}::test_the_merge_keeps_each_kind_of_row_in_its_columns_and_refuses_others",),
    ),
    # The report's flagged record (issue 24): written with each commit, migrated once, and the
    # superseded versions it cannot hold read from the versions.
    Mutant(
        "flagged-not-written-at-commit",  # a commit of rows not written ahead (events, tests)
        "exporter/store/local/dataset.py",
        "                flagged_record(table), FLAGGED_DIR, FLAGGED_PARTITION, FLAGGED_SCHEMA, tag\n",
        "                flagged_record(table)[:0], FLAGGED_DIR, FLAGGED_PARTITION, FLAGGED_SCHEMA, tag\n",
        (
            f"{FLAGGED}::"
            "test_a_superseded_version_the_record_does_not_hold_is_read_from_the_versions",
        ),
    ),
    Mutant(
        "flagged-of-rows-written-ahead-dropped",  # a backfill's rows go through spill()
        "exporter/store/local/dataset.py",
        "            flagged = flagged_record(table)\n",
        "            flagged = flagged_record(table)[:0]\n",
        (f"{FLAGGED}::test_each_commit_records_its_flagged_versions",),
    ),
    Mutant(
        "flagged-migration-writes-nothing",  # an old dataset marked recorded, empty
        "exporter/store/local/dataset.py",
        "        yield FLAGGED_PARTITION, flagged_of(months[month])\n",
        "        yield FLAGGED_PARTITION, flagged_of([])\n",
        (
            f"{FLAGGED}::"
            "test_a_dataset_written_before_the_record_reports_the_same_after_its_migration",
        ),
    ),
    Mutant(
        "flagged-record-without-errors",  # a finished version with an error text left out
        "exporter/store/local/spill.py",
        "    return table.select(FLAGGED_COLUMNS).filter(pc.or_(pc.invert(terminal), erred))\n",
        "    return table.select(FLAGGED_COLUMNS).filter(pc.invert(terminal))\n",
        (
            f"{FLAGGED}::"
            "test_a_dataset_written_before_the_record_reports_the_same_after_its_migration",
        ),
    ),
    Mutant(
        "flagged-unflagged-superseded-not-read",  # a superseded finished version never subtracted
        "exporter/analytics/report_figures.py",
        '        if execute(con, f"SELECT count(*) FROM {_UNFLAGGED}")[1][0][0]:\n',
        "        if False:\n",
        (
            f"{FLAGGED}::"
            "test_a_superseded_version_the_record_does_not_hold_is_read_from_the_versions",
        ),
    ),
    Mutant(
        "flagged-whole-unflagged-superseded-not-read",  # the same, all time (one join)
        "exporter/analytics/report_figures.py",
        '        unflagged = f"SELECT id, version FROM {ROWS} WHERE superseded IS NULL"\n',
        '        unflagged = f"SELECT id, version FROM {ROWS} WHERE false"\n',
        (
            f"{FLAGGED}::"
            "test_a_superseded_version_the_record_does_not_hold_is_read_from_the_versions",
        ),
    ),
    # The report's failing and stuck lists written by DuckDB for --format json (issue 24).
    Mutant(
        "report-json-ages-rounded-half-up",  # an age of n.5 s: n + 1 where Python says even
        "sql/90_report.sql",
        "    + CASE WHEN rem > 500000 OR (rem = 500000 AND ((us - rem) // 1000000) % 2 <> 0)\n",
        "    + CASE WHEN rem >= 500000\n",
        (
            f"{REPORT_JSON}::test_ages_round_half_to_even_as_python_does",
            f"{REPORT_JSON}::test_the_lists_written_by_duckdb_are_the_bytes_orjson_writes[plain]",
        ),
    ),
    Mutant(
        "report-json-upper-case-escapes-kept",  # to_json's \\u000B where orjson writes \\u000b
        "exporter/analytics/report_figures.py",
        '    if any(b"\\\\u00" in text and _UPPER_ESCAPE.search(text) for text in lists):\n',
        "    if False:\n",
        (f"{REPORT_JSON}::test_the_lists_written_by_duckdb_are_the_bytes_orjson_writes[odd]",),
    ),
    Mutant(
        "summary-superseded-not-subtracted",  # every version counted as a latest state
        "sql/90_report.sql",
        "            -t::INTEGER, NULL, NULL\n        FROM gone\n",
        "            -t::INTEGER, NULL, NULL\n        FROM gone WHERE false\n",
        (
            f"{REPORT_SUMMARY}::"
            "test_per_action_figures_when_a_finished_version_was_superseded[summary]",
        ),
    ),
    Mutant(
        "summary-superseded-durations-kept",  # a finished version's duration, then changed
        "sql/90_report.sql",
        "        SELECT action, 'total_ms', total_duration_ms, -1\n        FROM gone\n",
        "        SELECT action, 'total_ms', total_duration_ms, -1\n        FROM gone WHERE false\n",
        (
            f"{REPORT_SUMMARY}::"
            "test_per_action_figures_when_a_finished_version_was_superseded[summary]",
        ),
    ),
    Mutant(
        "summary-total-unreadable-previous-raises",  # no total written again, ever
        "exporter/analytics/summary_total.py",
        "    except duckdb.Error:  # not a Parquet file (a copy cut short): every file is summed\n"
        "        return None\n",
        "    except duckdb.Error:  # not a Parquet file (a copy cut short): every file is summed\n"
        "        raise\n",
        ("tests/sync/test_summary.py::test_a_damaged_total_is_summed_again_from_every_file",),
    ),
    Mutant(
        "summary-total-damaged-previous-not-summed-again",
        "exporter/analytics/summary_total.py",
        "            except duckdb.Error:  # a damaged total (a copy cut short): not one to add to\n"
        '                con.execute(total_of, {"files": every})\n',
        "            except duckdb.Error:  # a damaged total (a copy cut short): not one to add to\n"
        "                raise\n",
        ("tests/sync/test_summary.py::test_a_damaged_total_is_summed_again_from_every_file",),
    ),
    Mutant(
        # issue 24: the histograms summed apart from the groups, each measure of them kept
        "summary-total-one-histogram-dropped",
        "exporter/analytics/summary_total.py",
        "    WHERE measure <> 'group'\n",
        "    WHERE measure = 'total_ms'\n",
        (
            f"{SUMMARY}::"
            "test_a_report_of_all_time_reads_the_total_of_the_summary_files_committed_now",
        ),
    ),
    Mutant(
        "summary-total-of-other-files-read",  # one name for every total: a stale one read
        "exporter/core/layout.py",
        '    digest = hashlib.sha256("\\n".join(sorted(summary_files)).encode()).hexdigest()[:32]\n',
        '    digest = hashlib.sha256(b"").hexdigest()[:32]\n',
        (
            f"{SUMMARY}::"
            "test_a_report_of_all_time_reads_the_total_of_the_summary_files_committed_now",
        ),
    ),
    Mutant(
        "summary-total-added-to-one-of-merged-files",  # the merged rows counted twice
        "exporter/analytics/summary_total.py",
        "    if not summed or not summed <= summary:\n",
        "    if not summed:\n",
        (
            f"{SUMMARY}::"
            "test_a_report_of_all_time_reads_the_total_of_the_summary_files_committed_now",
        ),
    ),
    Mutant(
        "summary-total-previous-files-added-again",  # the previous total's files twice
        "exporter/analytics/summary_total.py",
        "for f in summary if f not in summed]\n",
        "for f in summary]\n",
        (
            f"{SUMMARY}::"
            "test_a_report_of_all_time_reads_the_total_of_the_summary_files_committed_now",
        ),
    ),
    Mutant(
        "summary-total-read-for-a-window",  # the total of all months for a window of some
        "sql/90_report.sql",
        "    since IS NULL AND until IS NULL AND projects IS NULL\n    AND coalesce(recorded,",
        "    true\n    AND coalesce(recorded,",
        (
            f"{SUMMARY}::"
            "test_a_report_of_all_time_reads_the_total_of_the_summary_files_committed_now",
        ),
    ),
    Mutant(
        "summary-total-older-ones-deleted-at-once",  # a report connected to the last one fails
        "exporter/analytics/summary_total.py",
        '    for stale in [*others[:-1], *current.parent.glob(".total-*.tmp")]:\n',
        '    for stale in [*others, *current.parent.glob(".total-*.tmp")]:\n',
        (
            f"{SUMMARY}::"
            "test_a_report_of_all_time_reads_the_total_of_the_summary_files_committed_now",
        ),
    ),
    Mutant(
        "summary-quantiles-running-sum-not-per-histogram",  # positions off by those before
        "sql/90_report.sql",
        "    SELECT h.action, h.measure, h.ms, h.upto - g.before AS upto\n",
        "    SELECT h.action, h.measure, h.ms, h.upto AS upto\n",
        (f"{SUMMARY}::test_quantiles_from_the_histograms_are_quantile_cont_to_the_last_bit",),
    ),
    Mutant(
        "summary-first-created-unchecked",  # the first created_at of a superseded version
        "exporter/analytics/report_figures.py",
        "    if any(not _latest_at(con, bound, projects) for bound in doubtful if bound is not None):\n",
        "    if False:\n",
        (
            f"{REPORT_SUMMARY}::"
            "test_first_created_at_when_only_a_superseded_version_held_it[summary]",
        ),
    ),
    Mutant(
        "summary-quantiles-plain-arithmetic",  # DuckDB's interpolation is fused: last bits
        "exporter/analytics/report_figures.py",
        "                    between.append((r, name, point))\n",
        '                    r[name] = point["lo"] + (point["hi"] - point["lo"]) * point["d"]\n',
        (f"{SUMMARY}::test_quantiles_from_the_histograms_are_quantile_cont_to_the_last_bit",),
    ),
    Mutant(
        "summary-whole-month-ignores-since",  # a month the window cuts read whole
        "sql/90_report.sql",
        "        OR make_date(m // 100, m % 100, 1)::TIMESTAMP >= (since::TIMESTAMPTZ AT TIME ZONE 'UTC'))\n",
        "        OR true)\n",
        (f"{SUMMARY}::test_each_commit_records_the_summary_of_its_versions",),
    ),
    Mutant(
        "report-csv-without-freshness",  # every format says how fresh the data is: csv too
        "exporter/analytics/report_text.py",
        '    tables = [("freshness", [report.freshness], fresh), *_sections(report)]\n',
        '    tables = [("freshness", [], fresh), *_sections(report)]\n',
        (f"{HEADLINE}::test_csv_says_how_fresh_the_data_is",),
    ),
    Mutant(
        "age-in-the-session-time-zone",  # the DuckDB CLI in America/Los_Angeles: an hour off
        "sql/00_base.sql",
        "    (upto::TIMESTAMPTZ AT TIME ZONE 'UTC') - (since::TIMESTAMPTZ AT TIME ZONE 'UTC');\n",
        "    upto::TIMESTAMPTZ - since::TIMESTAMPTZ;\n",
        (
            "tests/analytics/test_views_db.py::"
            "test_ages_and_thresholds_do_not_depend_on_the_session_time_zone",
        ),
    ),
    Mutant(
        "stuck-threshold-in-the-session-time-zone",  # INTERVAL of days counted in local days
        "sql/00_base.sql",
        "    ((ts::TIMESTAMPTZ AT TIME ZONE 'UTC') - span::INTERVAL) AT TIME ZONE 'UTC';\n",
        "    ts::TIMESTAMPTZ - span::INTERVAL;\n",
        (
            "tests/analytics/test_views_db.py::"
            "test_ages_and_thresholds_do_not_depend_on_the_session_time_zone",
        ),
    ),
    Mutant(
        "report-problems-newest-first",  # on-call reads the oldest first
        "sql/90_report.sql",
        "ORDER BY p.kind, p.age DESC, p.id;",
        "ORDER BY p.kind, p.age, p.id;",
        ("tests/analytics/test_report_headline.py::test_on_call_tables_of_the_fixed_dataset",),
    ),
    Mutant(
        "doctor-damaged-file-unseen",  # a data file that is not Parquet: doctor said ok
        "exporter/ops/doctor.py",
        "    if _check_files(report, data_dir, live):\n",
        "    if True:\n",
        (
            "tests/ops/test_doctor.py::test_a_data_file_that_is_not_parquet_is_a_finding_the_readers_exit_6_and_a_sync_writes_it",
            "tests/ops/test_doctor.py::test_an_operations_file_that_is_not_parquet_is_restored_from_a_backup",
        ),
    ),
    Mutant(
        "damaged-file-an-sql-error",  # query/report: exit 7, DuckDB's error, no file, no fix
        "exporter/analytics/views.py",
        "    return damaged_in(str(exc), data_dirs) or QueryError(message)",
        "    return QueryError(message)",
        (
            "tests/ops/test_doctor.py::test_a_data_file_that_is_not_parquet_is_a_finding_the_readers_exit_6_and_a_sync_writes_it",
            "tests/ops/test_doctor.py::test_an_operations_file_that_is_not_parquet_is_restored_from_a_backup",
        ),
    ),
    Mutant(
        "damaged-names-file-kept",  # a damaged names table stays so until the names change
        "exporter/store/local/dataset.py",
        '            self.state.set_meta(EXPORTED_META, "")\n',
        "            pass\n",
        (
            "tests/ops/test_doctor.py::test_a_data_file_that_is_not_parquet_is_a_finding_the_readers_exit_6_and_a_sync_writes_it",
        ),
    ),
    Mutant(
        "damaged-operations-file-said-rewritten",  # 'run opsaudit sync' for data no sync rebuilds
        "exporter/store/local/reader.py",
        "    if table in FROM_STATE_FILES:\n",
        "    if True:\n",
        (
            "tests/ops/test_doctor.py::test_an_operations_file_that_is_not_parquet_is_restored_from_a_backup",
        ),
    ),
    Mutant(
        "damaged-file-outside-the-data-dir-the-datasets",  # own mine/projects/x.parquet: exit 6
        "exporter/store/local/reader.py",
        "                if p.name in _TABLE_DIRS and p.parent.resolve() in roots\n",
        "                if p.name in _TABLE_DIRS\n",
        ("tests/ops/test_doctor.py::test_a_damaged_file_outside_the_data_dir_is_the_querys_error",),
    ),
    Mutant(
        "damaged-file-relative-data-dir-unresolved",  # --data-dir data: its damaged file exit 7
        "exporter/store/local/reader.py",
        "    roots = {d.resolve() for d in data_dirs}\n",
        "    roots = set(data_dirs)\n",
        ("tests/ops/test_doctor.py::test_a_damaged_file_outside_the_data_dir_is_the_querys_error",),
    ),
    Mutant(
        "stuck-window-ignored",  # a month-old stuck operation keeps the alert on for ever
        "exporter/ops/check.py",
        "    if t.window is not None:\n        where.append(",
        "    if False:\n        where.append(",
        ("tests/ops/test_check.py::test_stuck_over_a_window_lets_old_stuck_operations_age_out",),
    ),
    Mutant(
        "fail-on-unknown-action-accepted",  # a misspelt action: a threshold that never fires
        "exporter/ops/check.py",
        "        if t.action is not None and t.action not in known:\n",
        "        if False:\n",
        (
            "tests/ops/test_check.py::"
            "test_an_unknown_action_is_a_usage_error_listing_the_known_ones",
        ),
    ),
    Mutant(
        "html-low-volume-not-greyed",  # 12 operations a day swing 0-20 % and drown the rest
        "exporter/analytics/html.py",
        "LOW_VOLUME_PER_DAY = 20\n",
        "LOW_VOLUME_PER_DAY = 0\n",
        ("tests/ops/test_html.py::test_charts_read_right_in_chromium",),
    ),
    Mutant(
        "html-latency-linear-axis",  # p99 flattens p50 and p90 against the axis
        "exporter/analytics/html.py",
        '    fig.update_yaxes(type="log")\n    _mark_partial_days(',
        "    _mark_partial_days(",
        ("tests/ops/test_html.py::test_charts_read_right_in_chromium",),
    ),
    Mutant(
        "html-partial-first-day-unmarked",
        "exporter/analytics/html.py",
        "    if start is not None and start > midnight:\n",
        "    if False:\n",
        (
            "tests/ops/test_html.py::test_charts_read_right_in_chromium",
            "tests/ops/test_html.py::test_partial_days",
        ),
    ),
    Mutant(
        "html-labels-clipped",  # tick labels outside the drawing
        "exporter/analytics/html.py",
        '        "yaxis": {"automargin": True},\n',
        '        "yaxis": {"automargin": False},\n        "margin": {"l": 0, "t": 50},\n',
        ("tests/ops/test_html.py::test_charts_read_right_in_chromium",),
    ),
    Mutant(
        "schedule-ignored",  # every open operation due in every run: a cron run costs a backfill
        "exporter/engine/schedule.py",
        "        if self.strict or op.changed_us is None or not op.is_open or op.misses:\n",
        "        if True:\n",
        (
            f"{SCHEDULE}::test_a_three_week_old_failed_operation_is_re_read_once_a_day_and_not_between",
        ),
    ),
    Mutant(
        "schedule-never-due",  # a cold open operation is never re-read: it stays stale for ever
        "exporter/engine/schedule.py",
        "        return now >= self.next_due(op)\n",
        "        return False\n",
        (
            f"{SCHEDULE}::test_a_three_week_old_failed_operation_is_re_read_once_a_day_and_not_between",
        ),
    ),
    Mutant(
        "schedule-not-batched",  # each cold operation due on its own: a GET each, run after run
        "exporter/engine/schedule.py",
        "        for grid in GRIDS_US:\n",
        "        for grid in ():\n",
        (f"{SCHEDULE}::test_a_projects_cold_operations_come_due_together",),
    ),
    Mutant(
        "allowance-ignores-schedule",  # the run's GETs go to operations that are not due
        "exporter/store/state.py",
        "                if due(OpenOp(*row)):\n",
        "                if True:\n",
        (f"{SCHEDULE}::test_a_run_wide_get_allowance_goes_to_due_operations_oldest_checked_first",),
    ),
    Mutant(
        "retry-at-ignored",
        "exporter/engine/schedule.py",
        "        if op.retry_us is not None and op.checked_us < op.retry_us <= now:\n",
        "        if False:\n",
        (f"{SCHEDULE}::test_retry_at_passing_makes_an_operation_due_in_the_next_run",),
    ),
    Mutant(
        "hot-not-every-run",
        "exporter/engine/schedule.py",
        "        if now - max(op.created_us, op.changed_us) < HOT_US:\n",
        "        if False:\n",
        (f"{SCHEDULE}::test_a_hot_operation_is_re_read_in_every_run",),
    ),
    Mutant(
        "finished-forgotten-after-one-look",  # issue 19 finding 18: before it settled
        "exporter/engine/walk.py",
        "    return changed_us is None or observed - changed_us >= FRESH_US\n",
        "    return True\n",
        (f"{ROBUST}::test_a_finished_operation_stays_tracked_while_it_settles",),
    ),
    Mutant(
        "config-unknown-key-ignored",  # a misspelt setting silently does nothing
        "exporter/cli/_config.py",
        "    if unknown:\n",
        "    if False:\n",
        ("tests/ops/test_cli_boundary.py::test_a_bad_config_file_is_a_usage_error",),
    ),
    Mutant(
        "config-file-not-read",
        "exporter/cli/_config.py",
        "            if values:\n                out[name] = values\n",
        "            pass\n",
        (
            "tests/ops/test_cli_boundary.py::"
            "test_a_config_file_sets_defaults_and_flags_and_environment_win",
        ),
    ),
    Mutant(
        "query-error-first-line-only",  # DuckDB's hint and caret line are what say the fix
        "exporter/analytics/views.py",
        "        cursor = con.execute(sql, params) if params is not None else con.execute(sql)\n"
        "    except duckdb.Error as exc:\n"
        "        raise _query_error(exc, _whole(exc), _DATA_DIRS.get(con, [])) from exc\n",
        "        cursor = con.execute(sql, params) if params is not None else con.execute(sql)\n"
        "    except duckdb.Error as exc:\n"
        "        raise _query_error(exc, _first_line(exc), _DATA_DIRS.get(con, [])) from exc\n",
        (
            "tests/analytics/test_cli.py::"
            "test_bad_sql_is_exit_7_with_duckdbs_whole_message_no_traceback",
        ),
    ),
    Mutant(
        "query-empty-statement-is-an-sql-error",
        "exporter/analytics/views.py",
        '        raise ConfigError("no SQL statement given (the text is empty or only comments)")',
        '        raise QueryError("no SQL statement given (the text is empty or only comments)")',
        ("tests/analytics/test_cli.py::test_query_empty_statement_is_a_usage_error",),
    ),
    Mutant(
        "gc-thresholds-not-restored",  # a notebook's collector left as a run set it
        "exporter/engine/sync.py",
        "            if not _gc_runs:\n                gc.set_threshold(*found)\n",
        "            if not _gc_runs:\n                pass\n",
        ("tests/sync/test_gc.py",),
    ),
    Mutant(
        "gc-restored-while-another-run-goes-on",  # the first run to end restores
        "exporter/engine/sync.py",
        "            found = _gc_runs.pop()\n            if not _gc_runs:\n",
        "            found = _gc_runs.pop(0)\n            if True:\n",
        ("tests/sync/test_gc.py",),
    ),
    Mutant(
        "doctor-another-server-called-the-api",  # `ok key` before a discovery that fails
        "exporter/ops/doctor.py",
        "    except ValueError:\n        return None\n",
        "    except ValueError:\n        return []\n",
        ("tests/ops/test_doctor.py::test_a_server_that_is_not_the_api_is_a_base_url_finding",),
    ),
    Mutant(
        "doctor-api-answer-without-its-key-called-another-server",  # the API's rare 200
        "exporter/ops/doctor.py",
        "    return listed if isinstance(listed, list) else []\n",
        "    return listed if isinstance(listed, list) else None\n",
        (
            "tests/ops/test_doctor.py::"
            "test_a_json_answer_without_the_organizations_list_is_not_a_base_url_finding",
        ),
    ),
    Mutant(
        "doctor-views-file-unchecked",  # doctor called a views file naming missing files ok
        "exporter/ops/doctor.py",
        "    _check_views(report, data_dir, live)\n",
        "",
        ("tests/ops/test_doctor.py::test_views_file_is_checked_as_a_duckdb_shell_sees_it",),
    ),
    Mutant(
        "superseded-record-dropped",  # issue 24: the commit of version n+1 marks n superseded
        "exporter/store/local/spill.py",
        '    later = table.filter(pc.greater(table["version"], 1))\n',
        '    later = table.filter(pc.greater(table["version"], 1 << 30))\n',
        (f"{SUPERSEDED}::test_each_commit_records_what_its_later_versions_supersede",),
    ),
    Mutant(
        # issue 24: the report joins the record as it is (no DISTINCT): each pair written once
        "superseded-pair-recorded-twice",
        "exporter/store/local/spill.py",
        '    later = table.filter(pc.greater(table["version"], 1))\n',
        '    later = table.filter(pc.greater(table["version"], 1))\n'
        "    later = pa.concat_tables([later, later])\n",
        (
            f"{SUPERSEDED}::test_each_commit_records_what_its_later_versions_supersede",
            f"{FLAGGED}::test_each_commit_records_its_flagged_versions",
        ),
    ),
    Mutant(
        # issue 24: a report's connection defines only the names its queries call
        "report-calls-incomplete",
        "exporter/analytics/report_figures.py",
        "    report_by_action_scan report_errors_in report_failure_groups_in",
        "    report_by_action_scan report_failure_groups_in",
        (f"{REPORT_SUMMARY}::test_report_calls_name_every_definition_the_reports_queries_mention",),
    ),
    Mutant(
        "superseded-migration-empty",  # issue 24: a dataset from before migrated exactly
        "exporter/store/local/spill.py",
        "    later = pa.concat_tables(parts) if parts else SUPERSEDED_SCHEMA.empty_table()\n",
        "    later = SUPERSEDED_SCHEMA.empty_table()\n",
        (
            f"{SUPERSEDED}::test_a_dataset_written_before_the_record_reads_the_same_after_its_migration",
        ),
    ),
    Mutant(
        "spill-rows-ignored",  # issue 24: a local commit holds spill_rows, written ahead
        "exporter/engine/sync.py",
        "        if self.spilling and self.config.spill_rows is not None:\n",
        "        if False:\n",
        (f"{SPILL}::test_a_backfill_writes_its_months_whole_and_compacts_nothing",),
    ),
    Mutant(
        "spill-off-with-events",  # issue 22: an events backfill makes 10k-version commits
        "exporter/engine/sync.py",
        "            self.outbox is None or self.outbox.rows is not None\n",
        "            self.outbox is None\n",
        (f"{SPILL}::test_with_events_rows_are_written_ahead_and_each_makes_one_event",),
    ),
    Mutant(
        "events-of-rows-written-ahead-dropped",  # issue 22: rows gone ahead make no event
        "exporter/engine/sync.py",
        "                chunk.events = self.outbox.keep(chunk.table)\n",
        "                pass\n",
        (f"{SPILL}::test_with_events_rows_are_written_ahead_and_each_makes_one_event",),
    ),
    Mutant(
        "events-kept-where-an-error-ends-the-committer",  # the run never ended (walks waited)
        "exporter/engine/sync.py",
        "        except BaseException as exc:\n"
        '            log.debug("writing rows ahead failed: %s", exc)',
        "        except OSError as exc:\n"
        '            log.debug("writing rows ahead failed: %s", exc)',
        (f"{EVENTS}::test_an_error_keeping_a_chunks_events_fails_the_run",),
    ),
    Mutant(
        "events-backlog-error-ends-the-committer",  # the run never ended (walks waited)
        "exporter/engine/sync.py",
        "            except BaseException as exc:  # the backlog cannot be built (rows deleted)\n",
        "            except OSError as exc:\n",
        (f"{EVENTS}::test_a_backlog_that_cannot_be_built_fails_the_run",),
    ),
    Mutant(
        "events-waiting-unbounded",  # issue 22: a backfill's events all wait in memory
        "exporter/engine/sync.py",
        "                or events >= self.config.commit_events\n",
        "",
        (f"{SPILL}::test_events_waiting_for_their_commit_are_bounded",),
    ),
    Mutant(
        "events-outbox-rows-named-by-the-first",  # issue 22: a later row's events, wrong names
        "exporter/events/outbox.py",
        "            runs = _runs_slice(projects, start, n)\n",
        "            runs = _runs_slice(projects, 0, n)\n",
        (f"{EVENTS}::test_a_commit_of_many_events_is_recorded_in_bounded_outbox_rows",),
    ),
    Mutant(
        "events-file-built-without-the-facts",  # issue 22: followed lines say null for names
        "exporter/events/outbox.py",
        "                batch.rows, batch.names = part, names\n",
        "                batch.rows, batch.names = part, (names[0], pa.nulls(n, pa.string()), names[2])\n",
        (f"{EVENTS}::test_one_event_per_new_version_after_the_backfill",),
    ),
    Mutant(
        "lake-superseded-record-dropped",  # issue 24 on object storage: the record of batch N
        "exporter/store/lake/tables.py",
        "            if record.num_rows:\n                props = dl.CommitProperties(\n",
        "            if False:\n                props = dl.CommitProperties(\n",
        (f"{LAKE_SUPERSEDED}::test_each_lake_commit_records_what_its_later_versions_supersede",),
    ),
    Mutant(
        "lake-superseded-unfiltered",  # readers took a killed attempt's record for committed
        "exporter/store/lake/superseded.py",
        '    return f"{TXN} <= {int(txn or 0)}"\n',
        '    return "true"\n',
        (f"{LAKE_SUPERSEDED}::test_a_kill_between_the_record_and_the_versions_commit",),
    ),
    Mutant(
        "lake-superseded-retry-recorded-twice",  # a killed attempt's record left beside the retry
        "exporter/store/lake/tables.py",
        '            sup.delete(f"{TXN} >= {version}")\n',
        "            pass\n",
        (f"{LAKE_SUPERSEDED}::test_a_kill_between_the_record_and_the_versions_commit",),
    ),
    Mutant(
        "lake-superseded-migration-empty",  # a lake dataset from before migrated exactly
        "exporter/store/lake/tables.py",
        "        record = derive(None if versions is None else versions.to_pyarrow_dataset(), self._txn)\n",
        "        record = derive(None, self._txn)\n",
        (
            f"{LAKE_SUPERSEDED}::test_a_lake_dataset_written_before_the_record_reads_the_same_after_its_migration",
        ),
    ),
    Mutant(
        "sync-lets-pyarrow-import-pandas",  # issue 24: +0.25 s CPU, +40 MiB per sync
        "exporter/engine/sync.py",
        "    arrow_without_pandas()\n",
        "",
        (f"{BACKFILL}::test_a_sync_process_never_imports_pandas",),
    ),
    Mutant(
        "sync-lets-pyarrow-import-numpy",  # issue 24: +0.1 s CPU, +10 MiB per sync
        "exporter/cli/_group.py",
        "            numpy_out_of_reach()  # before an option's callback may import pyarrow\n",
        "            pass\n",
        (f"{BACKFILL}::test_a_sync_process_runs_as_if_numpy_were_not_installed",),
    ),
    Mutant(
        "empty-source-typed-by-duckdb-from-arrow",  # +0.33 s CPU, +45 MiB: it imports pandas
        "exporter/analytics/views.py",
        '    columns = ", ".join(f"CAST(NULL AS {duckdb_type(f.type)}) AS {_ident(f.name)}" for f in schema)\n',
        "    types = duckdb.connect().from_arrow(schema.empty_table()).types\n"
        '    columns = ", ".join(f"CAST(NULL AS {t}) AS {_ident(f.name)}" for f, t in zip(schema, types))\n',
        (
            "tests/analytics/test_views_db.py::test_views_over_sources_without_files_do_not_load_pandas",
        ),
    ),
    Mutant(
        "numpy-refused-where-opsaudit-does-not-own-the-process",  # a notebook lost numpy
        "exporter/cli/_group.py",
        "        if name in WITHOUT_NUMPY and self.owns_process:\n",
        "        if name in WITHOUT_NUMPY:\n",
        (f"{BACKFILL}::test_the_command_line_called_in_process_leaves_numpy_importable",),
    ),
    Mutant(
        "commit-chunks-unbounded",  # issue 24: 10,000 small projects unpaced, +55 MiB peak RSS
        "exporter/engine/sync.py",
        "                or (chunks is not None and len(waiting) >= chunks)\n",
        "",
        ("tests/sync/test_commit_chunks.py::test_a_commit_holds_at_most_commit_chunks_chunks",),
    ),
    Mutant(
        "events-rows-unreadable-is-a-bug",  # a committed file gone: exit 5 "a bug", not 6
        "exporter/store/local/dataset.py",
        "        except (OSError, pa.ArrowException) as exc:  # a committed file gone or damaged\n",
        "        except ZeroDivisionError as exc:\n",
        (
            "tests/events/test_events.py::"
            "test_a_committed_file_gone_while_events_wait_is_a_storage_error_then_delivered",
        ),
    ),
    Mutant(
        "arrow-cpp-pool-left-to-mimalloc",  # issue 24: ~20 MiB more peak RSS at 1M operations
        "exporter/cli/_group.py",
        '            os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")\n',
        "            pass\n",
        (
            "tests/sync/test_allocators.py::test_sync_writes_parquet_without_mimalloc",
            "tests/sync/test_allocators.py::test_demo_writes_parquet_without_mimalloc",
        ),
    ),
    Mutant(
        "simulator-keeps-render-buffers",  # issue 24: the demo's simulator held ~390 MiB
        "exporter/simulator/_model.py",
        "    return bytes(memoryview(rendered))\n",
        "    return rendered\n",
        (
            "tests/simulator/test_memory.py::"
            "test_rendered_operations_cost_their_length_not_a_render_buffer",
        ),
    ),
    Mutant(
        "duckdb-package-imported-by-the-commands",  # issue 24: ~70-100 ms of query's start-up
        "exporter/core/duck.py",
        "    import _duckdb as duckdb\n",
        "    import duckdb\n",
        (
            "tests/test_import_costs.py::"
            "test_query_and_report_load_the_engine_without_the_duckdb_package",
        ),
    ),
    Mutant(
        "names-not-exported-scanned-by-the-bare-engine",  # query fails while a sync runs
        "exporter/store/local/reader.py",
        "            whole_package()  # DuckDB scans an Arrow table through the package's readers\n",
        "            pass\n",
        (
            "tests/test_import_costs.py::"
            "test_names_the_files_lag_behind_are_read_without_the_duckdb_package_loaded",
        ),
    ),
    Mutant(
        "notebook-connection-without-the-relation-api",  # exporter.connect().sql(...) fails
        "exporter/__init__.py",
        "        whole_package()  # a notebook's connection has DuckDB's whole API (`.sql(...).df()`)\n",
        "        pass\n",
        ("tests/test_import_costs.py::test_a_notebook_s_connection_has_the_whole_duckdb_api",),
    ),
    Mutant(
        "config-after-the-command-loses-to-the-one-before",  # the nearer file must win
        "exporter/cli/_config.py",
        "        ctx.default_map = {**(ctx.default_map or {}), **values}\n",
        "        ctx.default_map = {**values, **(ctx.default_map or {})}\n",
        ("tests/ops/test_cli_boundary.py::test_config_after_the_command_as_before_it",),
    ),
    Mutant(
        "webhook-without-a-port-left-to-http-client",  # "[::1]" sent to host ":" port 1
        "exporter/events/delivery.py",
        '        self._host, self._port = parts.hostname or "", parts.port or default\n',
        '        self._host, self._port = parts.hostname or "", parts.port\n',
        (f"{WEBHOOK}::test_a_url_without_a_port_is_sent_to_its_schemes_port",),
    ),
    Mutant(
        "webhook-name-lookup-unbounded",  # a hanging resolver held each attempt 20 s
        "exporter/events/delivery.py",
        "            connection._create_connection = connect_within  # type: ignore[attr-defined]\n",
        "",
        (f"{WEBHOOK}::test_webhook_timeout_bounds_the_name_lookup_too",),
    ),
    Mutant(
        "webhook-acks-saved-per-window-only",  # a kill resent the whole window
        "exporter/events/delivery.py",
        "                while not futures_wait(futures, _SAVE_ACKS_EVERY).done.issuperset(futures):\n",
        "                while futures_wait(futures).done and False:\n",
        (f"{WEBHOOK}::test_acknowledgements_are_saved_while_the_webhook_delivers",),
    ),
    Mutant(
        "lease-forgets-the-runs-it-replaced",  # a second early kill lost the first's row
        "exporter/store/lake/lease.py",
        "            self.carried = current.runs()[-_CARRIED_AT_MOST:]\n",
        "            self.carried = []\n",
        (
            "tests/lake/test_sync_lake.py::"
            "test_a_run_killed_before_its_first_commit_on_s3_is_recorded",
        ),
    ),
    Mutant(
        "query-hugeint-left-to-orjson",  # query --format json exited 5 on a BIGINT's sum
        "exporter/analytics/format.py",
        "        return value if _INT64_MIN <= value <= _UINT64_MAX else orjson.Fragment(str(value))\n",
        "        return value\n",
        (
            "tests/analytics/test_format.py::"
            "test_an_integer_past_64_bits_is_written_exactly_in_every_format",
        ),
    ),
    Mutant(
        "html-stuck-bars-count-failing",  # the chart said 4 stuck where the headline said 2
        "exporter/analytics/html.py",
        '        f"report_is_stuck(status, created_at, {_literal(as_of)}, {after})) AS stuck, "\n',
        '        f"NOT is_terminal(status) AND created_at < {_literal(as_of)} - {after}) AS stuck, "\n',
        ("tests/ops/test_html.py::test_the_stuck_bars_count_what_the_headline_counts",),
    ),
    Mutant(
        "permission-denied-reported-as-a-bug",  # exit 5 "a bug" for a mode of 000
        "exporter/cli/_group.py",
        "        except PermissionError as error:\n",
        "        except ZeroDivisionError as error:\n",
        ("tests/ops/test_not_a_bug.py::test_an_unreadable_data_dir_is_said_so_by_every_command",),
    ),
    Mutant(
        "query-ctrl-c-not-passed-to-duckdb",  # the query ran on to its end (minutes)
        "exporter/analytics/views.py",
        "            con.interrupt()\n",
        "            pass\n",
        ("tests/ops/test_not_a_bug.py::test_ctrl_c_during_a_query_is_an_interruption_not_a_bug",),
    ),
    Mutant(
        "unreadable-state-called-corrupt",  # advice to move it away: a new dataset
        "exporter/store/state.py",
        "            if not os.access(path, os.R_OK if read_only else os.R_OK | os.W_OK):\n",
        "            if False:\n",
        ("tests/ops/test_not_a_bug.py::test_a_state_file_of_another_user_is_not_called_corrupt",),
    ),
    Mutant(
        "key-file-byte-order-mark-kept",  # the BOM read as part of the key: "malformed"
        "exporter/cli/_common.py",
        '            key = raw.decode("utf-16" if utf16 else "utf-8-sig").strip()\n',
        '            key = raw.decode("utf-16" if utf16 else "utf-8").strip()\n',
        (f"{ROBUST}::test_a_key_file_saved_with_a_byte_order_mark_is_read",),
    ),
    Mutant(
        "config-setting-kinds-unchecked",  # max_rps = true ran at 1 request a second
        "exporter/cli/_config.py",
        "        if not ok(value):\n",
        "        if False:\n",
        ("tests/ops/test_cli_boundary.py::test_a_setting_of_the_wrong_kind_is_a_usage_error",),
    ),
    Mutant(
        "config-refused-value-blames-the-flag",  # max_rps = -5: "(env var: OPSAUDIT_MAX_RPS)"
        "exporter/cli/_config.py",
        "        error.param_hint = set_by\n",
        "        pass\n",
        ("tests/ops/test_cli_boundary.py::test_a_refused_setting_names_the_file_not_the_flag",),
    ),
    Mutant(
        "lease-lost-answer-taken-for-another-writer",  # a 500 on our own PUT: exit 4, "killed"
        "exporter/store/lake/lease.py",
        "        if got is not None and got[0] == body:\n",
        "        if False:\n",
        ("tests/lake/test_lease.py::test_a_lost_answer_to_our_own_lease_write_keeps_the_lease",),
    ),
    Mutant(
        "lease-ended-runs-named-from-the-first-renewal",  # killed before it: the record lost
        "exporter/store/lake/lease.py",
        "            self.unrecorded = list(current.unrecorded)[-_CARRIED_AT_MOST:]\n",
        "            pass\n",
        (
            "tests/lake/test_lease.py::"
            "test_an_ended_run_is_handed_on_by_a_holder_killed_before_it_renewed",
            "tests/lake/test_sync_lake.py::"
            "test_a_run_that_could_not_write_the_store_is_recorded_failed",
        ),
    ),
    Mutant(
        "lease-stale-etag-after-a-lost-renewal-answer",  # note_run returned, the run unnamed
        "exporter/store/lake/lease.py",
        "                new = self._landed(body) or self._put_over_our_own(body)\n",
        "                new = self._landed(body)\n",
        (
            "tests/lake/test_lease.py::"
            "test_a_renewal_over_an_earlier_write_of_ours_whose_answer_was_lost",
        ),
    ),
    Mutant(
        "lake-state-upload-lost-answer-fails",  # a 500 after it landed: exit 6, the key for why
        "exporter/store/lake/tables.py",
        "        with contextlib.suppress(PreconditionFailed):\n"
        "            self.objects.put(key, state_bytes(Path(state_file)), if_none_match=True)\n",
        "        if True:\n"
        "            self.objects.put(key, state_bytes(Path(state_file)), if_none_match=True)\n",
        ("tests/lake/test_tables.py::test_a_lost_answer_to_the_state_upload_is_ours",),
    ),
    Mutant(
        "lake-client-settings-from-environment-ignored",  # AWS_ALLOW_HTTP: exit 6 every run
        "exporter/store/lake/objects.py",
        "    for key, value in {**environment, **location.options}.items():\n",
        "    for key, value in location.options.items():\n",
        ("tests/lake/test_objects.py::test_client_settings_from_the_environment",),
    ),
    Mutant(
        "lake-killed-runs-scratch-kept",  # kill -9 left each run's state copy in /tmp for good
        "exporter/core/scratch.py",
        "                    shutil.rmtree(path, ignore_errors=True)\n",
        "                    pass\n",
        (
            "tests/lake/test_crash.py::"
            "test_a_killed_runs_scratch_copy_of_the_state_is_removed_by_the_next",
        ),
    ),
    Mutant(
        "views-db-read-only-holder-ignored",  # a -readonly shell's next query: "No files found"
        "exporter/analytics/views.py",
        "    return _locked(path)\n",
        "    return False\n",
        (
            "tests/analytics/test_views_db.py::"
            "test_a_read_only_shell_keeps_answering_across_a_compaction",
            "tests/analytics/test_views_db.py::test_a_read_only_reader_is_not_replaced_under",
        ),
    ),
    Mutant(
        "metrics-killed-run-not-the-last",  # every run killed: outcome="ok" stayed 1
        "exporter/ops/metrics.py",
        "    ended = [r for r in runs if r.outcome != Outcome.RUNNING]\n",
        "    ended = [r for r in runs if r.finished_at is not None]\n",
        ("tests/ops/test_metrics.py::test_a_killed_run_is_the_last_run_in_the_metrics",),
    ),
    Mutant(
        "lake-unrecorded-run-not-recorded",  # a refused upload: the run left no trace at all
        "exporter/store/lake/tables.py",
        "    for run in unrecorded:\n",
        "    for run in ():\n",
        (
            "tests/lake/test_sync_lake.py::"
            "test_a_run_that_could_not_write_the_store_is_recorded_failed",
        ),
    ),
    Mutant(
        "events-file-append-not-whole",  # a full disk left half a line after an exit-0 run
        "exporter/core/layout.py",
        "        with contextlib.suppress(OSError):  # cutting needs no space\n"
        "            os.ftruncate(fd, size)\n",
        "        pass\n",
        (
            f"{EVENTS}::test_a_full_disk_leaves_no_half_line_in_the_events_file",
            f"{APPENDER}",
        ),
    ),
    Mutant(
        "query-json-values-written-as-strings",  # raw::JSON as "{\"id\": ...}" in json
        "exporter/analytics/format.py",
        "    if type(value) is JsonText:\n        return _json_value(value)\n",
        "    if False:\n        return None\n",
        ("tests/analytics/test_format.py::test_json_values_are_written_as_json",),
    ),
    Mutant(
        "query-json-text-passed-through",  # its newlines split a JSONL record; NaN unreadable
        "exporter/analytics/format.py",
        "    return jsonable(parsed)\n",
        "    return orjson.Fragment(value.encode())\n",
        ("tests/analytics/test_format.py::test_json_values_are_written_as_json",),
    ),
    Mutant(
        "query-map-keys-by-str",  # a timestamp key "2026-11-26 00:00:00+00:00", not ISO
        "exporter/analytics/format.py",
        "        return {_json_key(k): jsonable(v) for k, v in value.items()}\n",
        "        return {str(k): jsonable(v) for k, v in value.items()}\n",
        ("tests/analytics/test_format.py::test_map_keys_are_written_as_their_values_are",),
    ),
    Mutant(
        "markdown-cells-cut",  # report --format markdown cut a 5,000-character error to 60
        "exporter/analytics/format.py",
        "    for row in _cells(rows, len(columns), thousands, cut=False):\n",
        "    for row in _cells(rows, len(columns), thousands):\n",
        ("tests/analytics/test_format.py::test_long_cells_are_cut_on_a_terminal_only",),
    ),
    Mutant(
        "table-float-digits-lost",  # 0.00004 printed 0, 1e300 as 301 digits
        "exporter/analytics/format.py",
        "        if value and not 10.0**-decimals / 2 <= abs(value) < 1e15:\n",
        "        if False:\n",
        ("tests/analytics/test_format.py::test_floats_past_a_columns_decimals_keep_their_digits",),
    ),
    Mutant(
        "library-data-dir-file-called-missing",  # exporter.connect(a file): "does not exist"
        "exporter/core/errors.py",
        "    if isinstance(data_dir, (str, os.PathLike)):\n",
        "    if False:\n",
        (
            "tests/ops/test_cli_boundary.py::"
            "test_a_data_dir_that_is_a_file_is_named_so_by_the_library_too",
        ),
    ),
    Mutant(
        "check-empty-prefix-is-exit-6",  # an empty local directory is exit 8, a prefix was 6
        "exporter/cli/_ops.py",
        "    except NoDatasetError:  # an empty prefix: as an empty local directory is (exit 8)\n",
        "    except ZeroDivisionError:\n",
        (
            "tests/lake/test_bad_input.py::"
            "test_check_of_an_empty_prefix_is_a_finding_as_of_an_empty_directory",
        ),
    ),
    Mutant(
        "lake-killed-readers-scratch-kept",  # a status killed mid-read left its state copy
        "exporter/store/readers.py",
        '    tmp = scratch_dir("opsaudit-read-").resolve()  # a reader killed with kill -9 too\n',
        '    tmp = Path(tempfile.mkdtemp(prefix="opsaudit-read-")).resolve()\n',
        (
            "tests/lake/test_crash.py::"
            "test_a_killed_runs_scratch_copy_of_the_state_is_removed_by_the_next",
        ),
    ),
    Mutant(
        "lake-refused-export-leaves-the-run-ok",  # exit 2, recorded ok everywhere for good
        "exporter/store/lake/store.py",
        "            told = self._after_commits(exc)\n"
        "            self._break(told or exc)  # the run's record says it as well\n",
        "            told = self._after_commits(exc)\n",
        (
            "tests/lake/test_sync_lake.py::"
            "test_a_run_that_could_not_write_the_store_is_recorded_failed",
        ),
    ),
    Mutant(
        "lake-key-character-told",  # "Invalid symbol 45, offset 3": a key's character
        "exporter/store/lake/objects.py",
        '    said = re.sub(r"(?i)(invalid (?:symbol|byte|character|length))[^.;:]*", r"\\1", said)\n',
        "",
        (
            "tests/lake/test_other_clouds.py::"
            "test_a_bad_key_names_azures_settings_and_shows_nothing_of_it",
        ),
    ),
    Mutant(
        "lake-azure-given-aws-advice",  # a refused Azure key: "check AWS_ACCESS_KEY_ID"
        "exporter/store/lake/objects.py",
        "            f\"({_CREDENTIALS[location.scheme]}) and the bucket's or container's policy\"\n",
        "            f\"({_CREDENTIALS['s3']}) and the bucket's or container's policy\"\n",
        (
            "tests/lake/test_other_clouds.py::"
            "test_a_bad_key_names_azures_settings_and_shows_nothing_of_it",
        ),
    ),
    Mutant(
        "lake-runs-before-any-batch-unseen",  # a refused first run: "no dataset yet", exit 6
        "exporter/store/readers.py",
        "        if lease is None or not ((not lease.released and lease.runs()) or lease.unrecorded):\n",
        "        if True:\n",
        (
            "tests/lake/test_sync_lake.py::"
            "test_a_first_run_the_store_refused_is_shown_before_any_batch",
        ),
    ),
    Mutant(
        "check-window-past-year-one-crashes",  # --max-age 99999999d: exit 5
        "exporter/ops/check.py",
        "        return dt.datetime.min.replace(tzinfo=dt.timezone.utc)\n",
        "        raise\n",
        ("tests/ops/test_check.py::test_windows_reaching_past_the_first_date_find_nothing_older",),
    ),
    Mutant(
        "check-json-buckets-missing-before-a-sync",  # open_by_last_read {} before a sync
        "exporter/ops/check.py",
        "    open_by_last_read: dict[str, int] = field(default_factory=no_reread_ages)\n",
        "    open_by_last_read: dict[str, int] = field(default_factory=dict)\n",
        ("tests/ops/test_check.py::test_the_json_has_the_same_keys_before_the_first_sync",),
    ),
    Mutant(
        "doctor-blames-the-key-for-the-apis-root",  # "use a personal or organization key"
        "exporter/ops/doctor.py",
        "        if projects.status_code == orgs.status_code == 404:\n",
        "        if False:\n",
        ("tests/ops/test_doctor.py::test_the_apis_root_without_its_path_is_named_not_the_key",),
    ),
    Mutant(
        "discovery-404-without-the-base-url-hint",  # nothing said where to look
        "exporter/engine/sync.py",
        "            if isinstance(exc, NotFoundError) and not config.org_ids:\n",
        "            if False:\n",
        ("tests/sync/test_failures.py::test_a_base_url_without_the_apis_path_is_named",),
    ),
    Mutant(
        "max-requests-below-any-run-refused-late",  # listed, then refused: a failed run
        "exporter/engine/settings.py",  # the CLI's --max-requests and sync() share it
        "LEAST_MAX_REQUESTS = 1 + NAMES_REQUESTS\n",
        "LEAST_MAX_REQUESTS = 1\n",
        (
            "tests/sync/test_budget_runs.py::"
            "test_a_request_budget_no_run_could_work_with_is_refused_before_any_request",
        ),
    ),
    Mutant(
        "event-flags-without-a-sink-silent",  # --events-filter alone did nothing, unsaid
        "exporter/cli/_events.py",
        "    if given:\n",
        "    if False:\n",
        (
            "tests/ops/test_cli_boundary.py::"
            "test_event_flags_without_a_sink_warn_that_no_event_is_recorded",
        ),
    ),
    Mutant(
        "views-db-path-split-by-duckdb",  # a data dir "a,b": opsaudit.duckdb not written
        "exporter/core/duck.py",
        '    if not any(c in directory.as_posix() for c in ",?"):\n',
        "    if True:\n",
        (
            "tests/analytics/test_views_db.py::"
            "test_views_database_of_a_directory_whose_name_duckdb_splits",
        ),
    ),
    Mutant(
        "names-versioned-by-spelling",  # 1.0 after 1, +00:00 after Z: a new version each
        "exporter/store/state.py",
        "            if before is not None and (before[1] == tracked or kind.same_state(before[1], obj)):\n",
        "            if before is not None and before[1] == tracked:\n",
        (f"{NAMES}::test_the_same_values_spelled_differently_are_not_a_new_version",),
    ),
    Mutant(
        "names-time-compared-as-text",  # ...Z and ...+00:00 differ
        "exporter/core/names.py",
        "                return (TIMESTAMP, to_micros(value))\n",
        "                return (TIMESTAMP, value)\n",
        (f"{NAMES}::test_the_same_values_spelled_differently_are_not_a_new_version",),
    ),
    Mutant(
        "names-bool-equal-to-one",  # default: true -> 1 would be no change
        "exporter/core/names.py",
        "    if isinstance(value, bool) or value is None:\n",
        "    if value is None:\n",
        (f"{NAMES}::test_a_branch_state_is_compared_by_meaning",),
    ),
    Mutant(
        "failed-project-with-commits-is-fatal",  # exit 5 "nothing synced" with rows committed
        "exporter/engine/sync.py",
        "            and not self.new_operations + self.changed_operations\n",
        "            and True\n",
        (f"{NAMES}::test_a_single_projects_listing_failing_after_its_operations_is_partial",),
    ),
    Mutant(
        "discarded-events-not-committed-on-object-storage",  # a fresh machine sends them
        "exporter/engine/publish.py",
        "    discarded = discard_backlog(store.state, sink)\n    publish(store)\n",
        "    discarded = discard_backlog(store.state, sink)\n",
        (
            "tests/lake/test_events_lake.py::"
            "test_a_discarded_backlog_stays_discarded_on_another_machine",
        ),
    ),
    Mutant(
        "discard-drops-every-sinks-backlog",  # the file's events were lost with the webhook's
        "exporter/events/config.py",
        '        con.execute(f"UPDATE event_batches SET {_CLEARED[sink]} WHERE {waiting} IS NOT NULL")\n',
        '        con.execute("UPDATE event_batches SET file_done = NULL, webhook_left = NULL")\n',
        (
            "tests/events/test_discard.py::"
            "test_a_dropped_sinks_backlog_is_discarded_and_the_other_sinks_kept",
        ),
    ),
    # Stopping and bounding the requests in flight (eighteenth session's reviews).
    Mutant(
        "http-attempt-unbounded",  # an answer trickled a byte at a time held a run for ever
        "exporter/api/http.py",
        '        self._watchdog = Watchdog(timeout.attempt, stop, name="opsaudit-http-watchdog")\n',
        '        self._watchdog = Watchdog(1e9, stop, name="opsaudit-http-watchdog")\n',
        (
            "tests/sync/test_http.py::test_an_answer_trickled_a_byte_at_a_time_is_cut_at_the_attempts_bound",
        ),
    ),
    Mutant(
        "http-stop-does-not-cut-in-flight",  # Ctrl-C waited for a trickled answer, for ever
        "exporter/api/http.py",
        '        self._watchdog = Watchdog(timeout.attempt, stop, name="opsaudit-http-watchdog")\n',
        '        self._watchdog = Watchdog(timeout.attempt, None, name="opsaudit-http-watchdog")\n',
        (
            "tests/sync/test_http.py::"
            "test_a_cut_ends_the_request_in_flight_as_no_failure_of_the_apis[stop]",
            "tests/sync/test_interrupt.py::test_a_signal_cuts_a_request_whose_answer_trickles",
        ),
    ),
    Mutant(
        "http-cutoff-ignored",  # a trickled page outlasted --time-budget
        "exporter/api/http.py",
        "                with self._watchdog.watch(self.cutoff) as watch:\n",
        "                with self._watchdog.watch(None) as watch:\n",
        (
            "tests/sync/test_http.py::"
            "test_a_cut_ends_the_request_in_flight_as_no_failure_of_the_apis[cutoff]",
        ),
    ),
    Mutant(
        "request-sent-after-its-pacing-wait",  # Ctrl-C: the walks waiting for a slot still sent
        "exporter/api/client.py",
        "        if self._stopped():  # while waiting for its slot",
        "        if False:  # while waiting for its slot",
        (
            "tests/sync/test_interrupt.py::test_a_signal_sends_no_request_waiting_for_its_pacing_slot",
        ),
    ),
    Mutant(
        "pacing-wait-outlasts-the-stop",  # the exit waited for every walk's pacing slot
        "exporter/engine/sync.py",
        "            pacer=Pacer(config.max_rps, config.route_max_rps, sleep=self.stop.wait),\n",
        "            pacer=Pacer(config.max_rps, config.route_max_rps),\n",
        (
            "tests/sync/test_interrupt.py::test_a_signal_sends_no_request_waiting_for_its_pacing_slot",
        ),
    ),
    Mutant(
        "library-ctrl-c-aborts-the-run",  # raised after every project, recorded killed, locked
        "exporter/engine/sync.py",
        "                done, self.interrupted = _first_ctrl_c_stops(\n"
        "                    lambda: _walks_ended(futures), self.stop\n"
        "                )\n",
        "                done, self.interrupted = _walks_ended(futures), None\n",
        (
            "tests/sync/test_interrupt.py::test_ctrl_c_in_a_library_call_stops_the_sync_and_records_it_interrupted",
        ),
    ),
    Mutant(
        "walks-waited-in-one-block",  # a Ctrl-C that only set the flag waited for every walk
        "exporter/engine/sync.py",
        "        done, pending = wait(futures, timeout=0.25, return_when=FIRST_EXCEPTION)\n",
        "        done, pending = wait(futures, return_when=FIRST_EXCEPTION)\n",
        (
            "tests/sync/test_interrupt.py::test_ctrl_c_in_a_library_call_stops_the_sync_and_records_it_interrupted",
        ),
    ),
    Mutant(
        "clock-skew-never-measured",  # a host clock 20 minutes off went unnoticed
        "exporter/api/client.py",
        "        if self.clock_skew is None:\n            self._note_clock(response)\n",
        "        if False:\n            self._note_clock(response)\n",
        ("tests/ops/test_doctor.py::test_a_host_clock_far_from_the_apis_is_an_error",),
    ),
    Mutant(
        "org-ids-ignored-beside-project-ids",  # --project X --org-id B: B never listed, exit 0
        "exporter/api/discovery.py",
        "    if project_ids and not org_ids:\n",
        "    if project_ids:\n",
        (
            "tests/sync/test_failures.py::"
            "test_projects_named_beside_an_organization_are_synced_with_its_projects",
        ),
    ),
    Mutant(
        "killed-run-figures-not-committed",  # a killed run said 0 requests, 0 new operations
        "exporter/engine/sync.py",
        "            state.count_progress(con, self.run_id, new, changed, self.stats)\n",
        "            pass\n",
        (
            "tests/sync/test_crash.py::"
            "test_a_killed_run_is_recorded_with_the_versions_its_commits_wrote",
        ),
    ),
    Mutant(
        "native-stderr-not-relayed",  # a Rust panic's lines among the JSON logs
        "exporter/cli/_sync.py",
        '    if log_format != "json" or not getattr(root, "owns_process", False):\n',
        "    if True:\n",
        (
            "tests/lake/test_sync_lake.py::"
            "test_a_refused_data_upload_keeps_json_logs_one_object_a_line",
        ),
    ),
    Mutant(
        "library-ctrl-c-past-the-walks-aborts",  # the run left running, later said killed
        "exporter/engine/sync.py",
        "            if isinstance(failure, KeyboardInterrupt) and not self.stop.is_set():\n",
        "            if False:\n",
        (
            "tests/sync/test_interrupt.py::"
            "test_ctrl_c_past_the_walks_in_a_library_call_records_the_run_interrupted",
        ),
    ),
    Mutant(
        "budget-cut-taken-for-a-timeout",  # a cut at the budget's end failed the run (exit 5)
        "exporter/api/http.py",
        '            return Cut("the run\'s time budget ended")\n',
        '            return ReadTimeout("the run\'s time budget ended")\n',
        (
            "tests/sync/test_http.py::"
            "test_a_cut_ends_the_request_in_flight_as_no_failure_of_the_apis[cutoff]",
        ),
    ),
    Mutant(
        "org-typo-beside-project-ids-syncs-nothing",  # exit 5, the projects named left out
        "exporter/api/discovery.py",
        "    if failed and len(failed) == len(orgs) and not named:\n",
        "    if failed and len(failed) == len(orgs):\n",
        (
            "tests/sync/test_failures.py::"
            "test_projects_named_beside_an_organization_are_synced_with_its_projects",
        ),
    ),
    Mutant(
        "delivery-deaf-to-the-runs-stop",  # SIGTERM: the whole backlog POSTed, then exit 0
        "exporter/engine/sync.py",
        '        threading.Thread(target=self._linked, name="opsaudit-deliver-stop", daemon=True).start()\n',
        "        pass\n",
        ("tests/events/test_webhook.py::test_a_signal_stops_the_webhooks_delivery",),
    ),
    Mutant(
        "stopped-delivery-recorded-ok",  # events left waiting by the signal, exit 0
        "exporter/engine/sync.py",
        "        summary.outcome = Outcome.INTERRUPTED\n        return True\n",
        "        return False\n",
        ("tests/events/test_webhook.py::test_a_signal_stops_the_webhooks_delivery",),
    ),
    Mutant(
        "events-delivered-counted-per-sink",  # "10 event(s) delivered" for 5 events
        "exporter/engine/sync.py",
        "        self.summary.events_delivered = max(by_sink.values(), default=0)\n",
        "        self.summary.events_delivered = sum(by_sink.values())\n",
        ("tests/events/test_events.py",),
    ),
    Mutant(
        "resumed-walk-start-taken-for-the-walks",  # --skip-idle: new operations left for a day
        "exporter/engine/walk.py",
        "        walked_from = None if resuming else start\n",
        "        walked_from = start\n",
        (f"{SKIP_IDLE}::test_a_walk_resumed_by_a_budgeted_run_does_not_make_its_project_idle",),
    ),
    Mutant(
        "idle-despite-names-due",  # a new branch's operations without names for a day
        "exporter/store/state.py",
        '                "AND names_read_us IS NOT NULL AND names_due = 0 "\n',
        '                "AND 1 = 1 "\n',
        (f"{SKIP_IDLE}::test_a_project_whose_names_are_due_is_never_idle",),
    ),
    Mutant(
        "last-run-outcome-not-checked",  # check: ok after auth_failed, failed, killed runs
        "exporter/ops/check.py",
        "        find(_last_run_failed(ended[-1], now))\n",
        "        pass\n",
        (
            "tests/ops/test_check.py::test_a_failed_last_run_is_a_finding_until_a_run_succeeds",
            "tests/ops/test_check.py::test_failing_project",
        ),
    ),
    Mutant(
        "check-runs-not-settled",  # check: a kill -9'd run still `running`, never judged
        "exporter/ops/check.py",
        "        runs = settled_runs(\n",
        "        runs = (lambda runs, _: runs)(\n",
        ("tests/ops/test_check.py::test_a_failed_last_run_is_a_finding_until_a_run_succeeds",),
    ),
    Mutant(
        "unjudged-check-keeps-last-verdict",  # check --metrics-file: ok 1 left after exit 6
        "exporter/cli/_ops.py",
        '                write_unjudged_check(ctx.params["metrics_file"], ctx.params.get("as_of"))\n',
        "                pass\n",
        ("tests/ops/test_metrics.py::test_a_check_that_cannot_judge_writes_not_ok",),
    ),
    Mutant(
        "unconfirmed-404-taken-for-a-spent-budget",  # a 404 lost, exit 0, every budgeted run
        "exporter/engine/walk.py",
        "                raise  # the run is stopping: nothing of this project is judged\n",
        "                raise  # the run is stopping: nothing of this project is judged\n"
        "            raise\n",
        (
            "tests/sync/test_failures.py::"
            "test_a_404_whose_confirming_get_the_budget_left_fails_the_project",
        ),
    ),
    Mutant(
        "older-state-read-unmigrated",  # check/status on an older dataset: exit 5
        "exporter/store/state.py",
        "                    self._read_migrated(self.format_version)\n",
        "                    pass\n",
        (
            "tests/ops/test_check.py::"
            "test_a_state_an_older_opsaudit_wrote_is_read_as_migrated_and_left_untouched",
        ),
    ),
    Mutant(
        "idle-project-not-marked-current",  # check: project_not_synced for a current project
        "exporter/engine/sync.py",
        "            state.found_idle(idle, self.started)\n",
        "            pass\n",
        (
            "tests/sync/test_skip_idle.py::test_a_project_left_idle_is_current_as_of_the_listing_that_showed_it",
        ),
    ),
    Mutant(
        "walk-leaves-current-behind",  # current_at NULL after a walk
        "exporter/store/state.py",
        '                "last_synced_us = ?, current_us = ?, walked_from_us = coalesce(?, walked_from_us), "\n',
        '                "last_synced_us = ?, current_us = NULL + ?, walked_from_us = coalesce(?, walked_from_us), "\n',
        (
            "tests/sync/test_skip_idle.py::test_a_project_left_idle_is_current_as_of_the_listing_that_showed_it",
        ),
    ),
    Mutant(
        "check-freshness-by-last-walk",  # stale_sync after budgeted --skip-idle runs
        "exporter/ops/check.py",
        "        [(p.current_at, p.first_seen_at) for p in projects if p.deleted_at is None],\n",
        "        [(p.last_synced_at, p.first_seen_at) for p in projects if p.deleted_at is None],\n",
        (
            "tests/sync/test_skip_idle.py::test_a_project_left_idle_is_current_as_of_the_listing_that_showed_it",
        ),
    ),
    Mutant(
        "check-project-by-last-walk",  # project_not_synced for a project found idle
        "exporter/ops/check.py",
        "        current = _at(p.current_at)\n        if last is None:\n",
        "        current = _at(p.last_synced_at)\n        if last is None:\n",
        (
            "tests/sync/test_skip_idle.py::test_a_project_left_idle_is_current_as_of_the_listing_that_showed_it",
        ),
    ),
    Mutant(
        "metrics-freshness-by-last-walk",  # the last-success metric stale
        "exporter/ops/metrics.py",
        "        live = [p for p in state.projects_rows() if p.deleted_at is None]\n",
        "        live = [p._replace(current_at=p.last_synced_at) for p in state.projects_rows() if p.deleted_at is None]\n",
        (
            "tests/sync/test_skip_idle.py::test_a_project_left_idle_is_current_as_of_the_listing_that_showed_it",
        ),
    ),
    Mutant(
        "status-lag-by-last-walk",  # status: lag since the last walk
        "exporter/ops/status.py",
        "        current = _at(p.current_at)\n",
        "        current = _at(p.last_synced_at)\n",
        (
            "tests/sync/test_skip_idle.py::test_a_project_left_idle_is_current_as_of_the_listing_that_showed_it",
        ),
    ),
    Mutant(
        "report-freshness-by-last-walk",  # report: stale after budgeted --skip-idle runs
        "exporter/analytics/report_figures.py",
        '        f"SELECT current_at, first_seen_at FROM projects WHERE {where}",\n',
        '        f"SELECT last_synced_at, first_seen_at FROM projects WHERE {where}",\n',
        (
            "tests/sync/test_skip_idle.py::test_a_project_left_idle_is_current_as_of_the_listing_that_showed_it",
        ),
    ),
    Mutant(
        "current-not-migrated",  # an older state's projects never current
        "exporter/store/state.py",
        '                con.execute("UPDATE projects SET current_us = last_synced_us")\n',
        "                pass\n",
        (
            "tests/ops/test_check.py::test_a_state_an_older_opsaudit_wrote_is_read_as_migrated_and_left_untouched",
        ),
    ),
    Mutant(
        "projects-view-without-current-fallback",  # an older projects file: current_at NULL
        "sql/00_base.sql",
        "    coalesce((to_json(p) ->> 'current_at')::TIMESTAMPTZ, last_synced_at) AS current_at,\n",
        "    (to_json(p) ->> 'current_at')::TIMESTAMPTZ AS current_at,\n",
        (
            "tests/ops/test_check.py::test_a_state_an_older_opsaudit_wrote_is_read_as_migrated_and_left_untouched",
        ),
    ),
    Mutant(
        "doctor-partial-discovery-a-warning",  # `doctor &&` passed a set-up syncing partially
        "exporter/ops/doctor.py",
        '            "error",\n            f"{message}, but some listings failed',
        '            "warn",\n            f"{message}, but some listings failed',
        ("tests/ops/test_doctor.py::test_an_organization_listing_refused_is_an_error",),
    ),
    Mutant(
        "doctor-clock-skew-a-warning",  # `doctor &&` passed a host 20 minutes off
        "exporter/ops/doctor.py",
        '            "clock", "error", skewed,',
        '            "clock", "warn", skewed,',
        ("tests/ops/test_doctor.py::test_a_host_clock_far_from_the_apis_is_an_error",),
    ),
    Mutant(
        "reason-phrase-unredacted",  # 403 Forbidden for key <key>: the whole key on stderr
        "exporter/api/client.py",
        "    reason = _server_text(response.reason_phrase)\n",
        "    reason = response.reason_phrase\n",
        (
            "tests/sync/test_http.py::test_a_reason_phrase_naming_the_key_is_redacted",
            f"{ROBUST}::test_9_a_status_line_naming_the_key_is_redacted_in_every_report",
        ),
    ),
    Mutant(
        "server-text-cut-before-redaction",  # a key split by the cut: its first part printed
        "exporter/api/client.py",
        "    return escape_controls(redact(text))[:limit]\n",
        "    return escape_controls(redact(text[:limit]))\n",
        ("tests/sync/test_http.py::test_a_key_the_cut_would_split_is_redacted_before_the_cut",),
    ),
    Mutant(
        "server-error-message-unbounded",  # a 2 MB message copied into every record
        "exporter/api/client.py",
        '            message = _server_text(str(body.get("message") or ""))\n',
        '            message = redact(str(body.get("message") or ""))\n',
        ("tests/sync/test_http.py::test_a_huge_error_message_is_bounded",),
    ),
    Mutant(
        "encoded-key-not-redacted",  # the key percent-encoded or in base64: printed, stored
        "exporter/core/errors.py",
        "            _SECRETS.update(_written_forms(secret))\n",
        "            _SECRETS.add(secret)\n",
        ("tests/sync/test_http.py::test_the_key_url_encoded_or_in_base64_is_redacted",),
    ),
    Mutant(
        "base64-key-at-one-alignment",  # a Basic header of "ops:<key>": the key's base64 kept
        "exporter/core/errors.py",
        "    for skip in range(3):  # bytes of other text before the secret's first byte\n",
        "    for skip in range(1):  # bytes of other text before the secret's first byte\n",
        ("tests/sync/test_http.py::test_the_key_url_encoded_or_in_base64_is_redacted",),
    ),
    Mutant(
        "base-url-at-after-a-slash-accepted",  # admin:12345/S3cret@h: host admin, port 12345
        "exporter/api/client.py",
        '    if "@" in base_url:\n',
        '    if "@" in parts.netloc:\n',
        (f"{STORAGE}::test_a_secret_in_the_base_url_is_refused_and_never_printed",),
    ),
    Mutant(
        "shown-url-userinfo-up-to-the-first-slash",  # user:Pa/ssW0rd@host printed whole
        "exporter/core/errors.py",
        """    return f"{scheme}{sep}{rest.rpartition('@')[2]}".split("?")[0].split("#")[0]\n""",
        """    head, slash, path = rest.partition("/")\n"""
        """    return f"{scheme}{sep}{head.rpartition('@')[2]}{slash}{path}".split("?")[0]\n""",
        (f"{STORAGE}::test_a_secret_in_the_base_url_is_refused_and_never_printed",),
    ),
    Mutant(
        "webhook-secret-not-text-a-bug",  # a non-UTF-8 secret file: exit 5, "a bug"
        "exporter/events/webhook.py",
        '    except UnicodeDecodeError:  # exit 5, "a bug", before; as --api-key-file says it\n',
        "    except ZeroDivisionError:\n",
        (f"{WEBHOOK}::test_a_webhook_secret_file_that_is_not_text_is_a_usage_error",),
    ),
    Mutant(
        "help-shows-configured-url-whole",  # base_url's password and token in every --help
        "exporter/cli/_common.py",
        '            extra["default"] = redact_url(extra["default"])\n',
        '            extra["default"] = extra["default"]\n',
        (
            "tests/ops/test_cli_boundary.py::"
            "test_help_shows_a_configured_url_default_without_its_secrets",
        ),
    ),
    Mutant(
        "compact-says-removed-on-object-storage",  # 29 "removed", none deleted for 24 h
        "exporter/cli/_sync.py",
        "    kept = (\n",
        '    kept = "" and (\n',
        ("tests/lake/test_sync_lake.py::test_readers_agree_with_a_local_run",),
    ),
    Mutant(
        "one-project-run-makes-the-trail-current",  # sync --project X cleared stale_sync
        "exporter/core/model.py",
        "        elif outcome == Outcome.OK and whole(started, ended):\n",
        "        elif outcome == Outcome.OK:\n",
        (
            "tests/ops/test_check.py::test_a_run_of_one_project_does_not_make_the_whole_trail_current",
        ),
    ),
    Mutant(
        "local-lake-error-scrubbed-by-family",  # file:// lake: KeyError 'file', a bug's exit
        "exporter/store/lake/objects.py",
        "    if not location.is_local:  # a directory (file://) has no settings family\n",
        "    if True:\n",
        (
            "tests/lake/test_objects.py::test_an_error_on_a_local_lake_is_classified_not_a_key_error",
        ),
    ),
    Mutant(
        "doctor-views-naming-older-files-ok",  # the DuckDB CLI read an older trail, doctor ok
        "exporter/ops/doctor.py",
        "            f\"'{path}'\" not in named\n",
        "            f\"'{path}'\" in named and False\n",
        ("tests/ops/test_doctor.py::test_a_views_file_naming_older_files_is_a_warning",),
    ),
    Mutant(
        "doctor-names-the-migrated-format",  # a format-6 file shown as format 12
        "exporter/ops/doctor_base.py",
        'f"{where}state format {format_version} (this',
        'f"{where}state format {FORMAT_VERSION} (this',
        (
            "tests/ops/test_doctor.py::"
            "test_a_state_an_older_opsaudit_wrote_is_named_by_its_own_format",
        ),
    ),
    Mutant(
        "doctor-corrupt-state-ends-the-report",  # the error alone, exit 6
        "exporter/ops/doctor.py",
        '        report.add("state", "error", str(exc), fix)\n        return []\n',
        "        raise exc\n",
        (
            "tests/ops/test_doctor.py::"
            "test_a_corrupt_state_beside_a_views_file_is_reported_with_the_rest",
        ),
    ),
    Mutant(
        "future-operation-made-the-checkpoint",  # one 2099 operation: nothing exported, for ever
        "exporter/engine/walk.py",
        "        if newest is not None and newest > ceiling:\n",
        "        if False:\n",
        (
            f"{ROBUST}::test_an_operation_created_in_the_future_does_not_blind_its_project",
            f"{ROBUST}::test_an_operation_ahead_of_the_clock_joins_the_checkpoint_once_passed",
        ),
    ),
    Mutant(
        "operation-above-the-ceiling-not-tracked",  # exported again in every run
        "exporter/engine/walk.py",
        "            if op.status not in terminal or fresh[k] or created[k] >= above\n",
        "            if op.status not in terminal or fresh[k]\n",
        (
            f"{ROBUST}::test_an_operation_created_in_the_future_does_not_blind_its_project",
            f"{ROBUST}::test_an_operation_ahead_of_the_clock_joins_the_checkpoint_once_passed",
        ),
    ),
    Mutant(
        "unchanged-operation-above-the-ceiling-forgotten",  # its change then came as new
        "exporter/engine/walk.py",
        "                and _settled(known.changed_us, observed)\n                and not self._above(created)\n",
        "                and _settled(known.changed_us, observed)\n",
        (f"{ROBUST}::test_an_operation_created_in_the_future_does_not_blind_its_project",),
    ),
    Mutant(
        "changed-operation-above-the-ceiling-forgotten",  # exported again in the next run
        "exporter/engine/walk.py",
        "        if is_terminal(op) and _settled(changed, observed) and not self._above(created):\n",
        "        if is_terminal(op) and _settled(changed, observed):\n",
        (f"{ROBUST}::test_an_operation_created_in_the_future_does_not_blind_its_project",),
    ),
    Mutant(
        "exception-from-outside-waits-for-every-walk",  # Airflow's timeout: the whole backfill
        "exporter/engine/sync.py",
        "                self.stop.set()\n                self.cancel.set()\n"
        "                if not isinstance(exc, KeyboardInterrupt):",
        "                if not isinstance(exc, KeyboardInterrupt):",
        (
            "tests/sync/test_interrupt.py::"
            "test_an_exception_from_a_signal_handler_in_a_library_call_stops_the_sync_at_once",
        ),
    ),
    Mutant(
        "ceiling-guessed-for-the-whole-walk",  # --project: an op 30 s ahead is the checkpoint
        "exporter/engine/walk.py",
        "            if guessed and self.client.clock_skew is not None:\n",
        "            if False:\n",
        ("tests/sync/test_robustness.py::test_with_project_the_ceiling_waits_for_the_apis_clock",),
    ),
    Mutant(
        "checkpoint-ahead-taken-as-is",  # a 2099 checkpoint: nothing read, ok, for ever
        "exporter/engine/walk.py",
        "        if ahead is None or not self._far_ahead(ahead):\n",
        "        if True:\n",
        (
            "tests/sync/test_robustness.py::"
            "test_a_checkpoint_an_older_opsaudit_took_from_the_future_fails_its_project",
        ),
    ),
    Mutant(
        "dropped-future-operation-tracked-for-ever",  # a 404 GET in every run
        "exporter/engine/walk.py",
        "            removed = now - entry.created_us >= RETENTION_US or self._far_ahead(entry.created_us)\n",
        "            removed = now - entry.created_us >= RETENTION_US\n",
        (
            "tests/sync/test_robustness.py::"
            "test_an_operation_created_in_the_future_that_the_api_dropped_is_no_longer_tracked",
        ),
    ),
    Mutant(
        "webhook-without-secret-accepted",  # never delivered, each run "waiting", exit 0
        "exporter/events/config.py",
        "        if self.webhook_url is not None and not self.webhook_key:\n",
        "        if False:\n",
        (
            "tests/sync/test_library.py::test_an_events_config_the_command_line_refuses_is_refused_when_made",
        ),
    ),
    Mutant(
        "event-filter-text-accepted",  # the run's commits fail: exit 6
        "exporter/events/config.py",
        "            if not isinstance(given, EventFilter):\n",
        "            if False:\n",
        (
            "tests/sync/test_library.py::test_an_events_config_the_command_line_refuses_is_refused_when_made",
        ),
    ),
    Mutant(
        "project-ids-iterator-used-up",  # a generator: nothing synced, ok
        "exporter/engine/settings.py",
        "    if not isinstance(ids, Collection):\n",
        "    if False:\n",
        ("tests/sync/test_library.py",),
    ),
    Mutant(
        "empty-project-ids-sync-everything",  # [] synced every project
        "exporter/engine/settings.py",
        "    if not ids:\n",
        "    if False:\n",
        ("tests/sync/test_library.py",),
    ),
    Mutant(
        "report-project-id-string-iterated",  # "p2": the projects 'p' and '2', 0 operations
        "exporter/analytics/report.py",
        "    if isinstance(project_ids, str):  # its characters were the projects: 0 operations\n",
        "    if False:\n",
        ("tests/analytics/test_report.py::test_report_project_filter",),
    ),
    Mutant(
        "state-marked-migrated-not-repaired",  # the file an opsaudit before the fix left
        "exporter/store/state.py",
        "if migrate and (version < FORMAT_VERSION or _missing_columns(self._con)):",
        "if migrate and version < FORMAT_VERSION:",
        (
            "tests/sync/test_storage.py::test_a_state_an_early_format_2_opsaudit_wrote_is_migrated_whole",
        ),
    ),
    Mutant(
        "format-2-late-columns-not-added",  # status, check, every sync: exit 5 for ever
        "exporter/store/state.py",
        "            for statement in _missing_columns(con):\n                con.execute(statement)\n",
        "",
        (
            "tests/sync/test_storage.py::test_a_state_an_early_format_2_opsaudit_wrote_is_migrated_whole",
        ),
    ),
    Mutant(
        "reader-of-a-state-marked-migrated-not-repaired",
        "exporter/store/state.py",
        "if self.format_version < FORMAT_VERSION or _missing_columns(self._con):",
        "if self.format_version < FORMAT_VERSION:",
        (
            "tests/sync/test_storage.py::test_a_state_an_early_format_2_opsaudit_wrote_is_migrated_whole",
        ),
    ),
    Mutant(
        "settings-types-unchecked",  # concurrency="4": a bare TypeError; 2.5 taken
        "exporter/engine/settings.py",
        "        _check_number(option, value, integer=integer, optional=optional)\n",
        "        pass\n",
        ("tests/sync/test_library.py",),
    ),
    Mutant(
        "sys-exit-in-a-library-sync-aborts-it",  # uncommitted, `running`, the lock held
        "exporter/engine/sync.py",
        "            aborted = isinstance(failure, KeyboardInterrupt)\n",
        "            aborted = failure is not None and not isinstance(failure, Exception)\n",
        (
            "tests/sync/test_interrupt.py::"
            "test_an_exception_from_a_signal_handler_in_a_library_call_stops_the_sync_at_once",
        ),
    ),
    Mutant(
        "lib2-library-argument-types-unchecked",  # data_dir=None, api_key=b"...": bare errors
        "exporter/core/errors.py",
        "    if isinstance(value, kinds) and not isinstance(value, but):\n        return\n",
        "    return\n",
        (
            "tests/sync/test_library.py::test_a_library_value_of_the_wrong_type_or_range_is_refused_before_anything_is_written",
            "tests/sync/test_library.py::test_a_reader_given_an_argument_of_the_wrong_type_says_which",
            "tests/sync/test_library.py::test_a_helper_given_an_argument_of_the_wrong_type_says_which",
        ),
    ),
    Mutant(
        "events-file-text-kept-as-text",  # EventsConfig(file="events.jsonl")
        "exporter/events/config.py",
        "            self.file = Path(self.file)\n",
        "            pass\n",
        ("tests/sync/test_library.py::test_an_events_file_given_as_text_is_its_path",),
    ),
    Mutant(
        "lib2-library-counts-unchecked",  # commit_rows=-1, max_gets_per_run=-1 taken silently
        "exporter/engine/settings.py",
        "    _check_counts(config)\n",
        "",
        (
            "tests/sync/test_library.py::test_a_library_value_of_the_wrong_type_or_range_is_refused_before_anything_is_written",
        ),
    ),
    Mutant(
        "lakedoc-no-credentials-said-unreachable",  # sent after the endpoint, not the keys
        "exporter/store/lake/objects.py",
        "    if any(host in text for host in _METADATA_HOSTS):\n",
        "    if False:\n",
        (
            "tests/lake/test_bad_input.py::test_no_credentials",
            "tests/lake/test_doctor_lake.py::test_no_credentials",
        ),
    ),
    Mutant(
        "lakedoc-doctor-skips-the-versions-log",  # its damaged commit not named by tables
        "exporter/ops/doctor_lake.py",
        "    for name in TABLES:\n",
        "    for name in TABLES[1:]:\n",
        ("tests/lake/test_doctor_lake.py::test_a_damaged_delta_commit_file_is_an_error_naming_it",),
    ),
    Mutant(
        "lakedoc-doctor-writes-the-clock-probe",  # doctor wrote to the dataset it checks
        "exporter/ops/doctor_lake.py",
        "        info = ds.lease().read()\n",
        "        lease = ds.lease()\n        lease.store_now()\n        info = lease.read()\n",
        (
            "tests/lake/test_doctor_lake.py::"
            "test_a_healthy_dataset_is_ok_in_every_finding_and_nothing_is_written",
        ),
    ),
    Mutant(
        "ev2-events-written-to-a-pipe",  # every run wrote the whole backlog to it again
        "exporter/events/eventsfile.py",
        "            if not stat.S_ISREG(os.fstat(fd).st_mode):\n",
        "            if False:\n",
        (
            "tests/events/test_events.py::test_an_events_file_that_is_a_pipe_gets_nothing_written_twice",
        ),
    ),
    Mutant(
        "ev2-events-file-pipe-not-refused-by-the-cli",  # exit 0, events waiting for ever
        "exporter/cli/_events.py",
        "and events_file.exists() and not events_file.is_file():\n",
        "and False:\n",
        (
            "tests/events/test_events.py::test_an_events_file_that_is_a_pipe_gets_nothing_written_twice",
        ),
    ),
    Mutant(
        "ev2-backlog-total-the-larger-sinks",  # 35 waiting (35 for the file, 19 for the webhook)
        "exporter/events/config.py",
        "    return Backlog(pending, oldest, delivered, int(either))\n",
        "    return Backlog(pending, oldest, delivered, max(pending.values()))\n",
        (
            "tests/events/test_events.py::test_events_waiting_for_different_sinks_are_counted_once_each",
        ),
    ),
    Mutant(
        "ev2-webhook-delivery-past-the-time-budget",  # a 4 min run held for an hour
        "exporter/engine/sync.py",
        "self.dataset.versions_reader(), stop, deadline)\n",
        "self.dataset.versions_reader(), stop, None)\n",
        ("tests/events/test_events.py::test_time_budget_bounds_the_webhooks_delivery",),
    ),
    Mutant(
        "ev2-webhook-lane-sends-on-past-the-deadline",
        "exporter/events/delivery.py",
        "            if self.stop.is_set() or self._late() or not self._send(event_id, body):\n",
        "            if self.stop.is_set() or not self._send(event_id, body):\n",
        ("tests/events/test_events.py::test_time_budget_bounds_the_webhooks_delivery",),
    ),
    Mutant(
        "ev2-webhook-redirect-unexplained",  # "HTTP 301 after 6 attempt(s)", run after run
        "exporter/events/delivery.py",
        "        if 300 <= response.status < 400:\n",
        "        if False:\n",
        (
            "tests/events/test_events.py::test_a_redirecting_webhook_is_named_as_such_without_its_target",
        ),
    ),
    Mutant(
        "webhook-secret-alone-unsaid",  # cron without $OPSAUDIT_WEBHOOK_URL: events never sent
        "exporter/cli/_events.py",
        "    secret_alone = webhook_secret_file is not None and not webhook\n",
        "    secret_alone = False\n",
        (
            "tests/ops/test_cli_boundary.py::"
            "test_a_webhook_secret_without_a_webhook_warns_that_it_gets_no_events",
        ),
    ),
    Mutant(
        "edge2-group-config-unread-leaves-check-verdict",  # opsaudit --config BAD check: ok 1
        "exporter/cli/__init__.py",
        "        not_run(ctx)  # `check --metrics-file`: not ok, not the last verdict\n",
        "        pass\n",
        ("tests/ops/test_metrics.py::test_a_check_whose_group_config_fails_writes_not_ok",),
    ),
    Mutant(
        "edge2-events-appender-open-traceback",  # --events-file in a missing directory
        "exporter/events/appender.py",
        "    stdout = sys.stdout.buffer\n",
        "    stdout = sys.stdout.buffer\n"
        "    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NONBLOCK))\n",
        (
            "tests/events/test_events.py::"
            "test_an_events_file_that_cannot_be_opened_is_one_line_and_its_events_wait",
        ),
    ),
    Mutant(
        "edge2-events-file-warning-without-fix",  # "events file X: Is a directory" alone
        "exporter/events/delivery.py",
        '                "outbox for the next run that can append to it (a file, in a directory '
        'that "\n                "exists, this user may write)"\n',
        '                ""\n',
        (
            "tests/events/test_events.py::"
            "test_an_events_file_that_cannot_be_opened_is_one_line_and_its_events_wait",
        ),
    ),
    Mutant(
        "edge2-lock-wait-ignores-stop",  # sync --wait: Ctrl-C, SIGTERM waited for the lock
        "exporter/store/state.py",
        "(0 if wait and stop is None else fcntl.LOCK_NB)",
        "(0 if wait else fcntl.LOCK_NB)",
        ("tests/sync/test_interrupt.py::test_a_signal_stops_a_sync_waiting_for_the_lock",),
    ),
    Mutant(
        "edge2-lease-wait-ignores-stop",  # the same on object storage: slept until it lapsed
        "exporter/store/lake/store.py",
        "                self.lease.stop_waiting = stop  # a sync's Ctrl-C or SIGTERM\n",
        "",
        ("tests/lake/test_sync_lake.py::test_a_stop_ends_a_sync_waiting_for_the_lease",),
    ),
    Mutant(
        "edge2-check-sigterm-keeps-verdict",  # timeout 60 opsaudit check: ok 1 left in the file
        "exporter/cli/_ops.py",
        "        previous = _terminate_by_exit()\n",
        "        previous = None\n",
        ("tests/ops/test_metrics.py::test_a_check_stopped_by_sigterm_writes_not_ok",),
    ),
    Mutant(
        "edge2-stale-views-blamed-on-a-program",  # after a killed compact: "close the programs"
        "exporter/ops/doctor.py",
        '"file(s) the dataset has (a sync or compact that found it open in another program, "',
        '"file(s) the dataset has (a sync found it open in another program, "',
        ("tests/ops/test_doctor.py::test_a_views_file_naming_older_files_is_a_warning",),
    ),
    Mutant(
        "edge2-retry-budget-message-counts-max-attempts",  # "after 8 attempts": 5 were made
        "exporter/api/client.py",
        """made = f"{attempt} attempt{'s' if attempt > 1 else ''}"\n""",
        """made = f"{policy.max_attempts} attempt{'s' if attempt > 1 else ''}"\n""",
        ("tests/sync/test_http.py::test_retries_stop_once_max_elapsed_has_passed",),
    ),
    Mutant(
        "rv21-threshold-example-refused",  # the message's example was refused by parse_threshold
        "exporter/ops/check.py",
        "parse_threshold('stuck > 0') makes one)",
        "parse_threshold('failed>0') makes one)",
        (
            "tests/sync/test_library.py::"
            "test_the_threshold_a_wrong_type_message_names_is_one_that_parses",
        ),
    ),
    Mutant(
        "rv21-render-refuses-a-dataframes-columns",  # "columns is Index, not a sequence of ..."
        "exporter/analytics/format.py",
        'check_type("columns", columns, Iterable,',
        'check_type("columns", columns, Sequence,',
        ("tests/sync/test_library.py::test_values_the_argument_checks_refused_though_they_worked",),
    ),
    Mutant(
        "rv21-render-refuses-numpy-rows",  # "rows is ndarray, not a sequence of rows"
        "exporter/analytics/format.py",
        'check_type("rows", rows, Iterable,',
        'check_type("rows", rows, Sequence,',
        ("tests/sync/test_library.py::test_values_the_argument_checks_refused_though_they_worked",),
    ),
    Mutant(
        "rv21-report-top-numpy-int-refused",  # build_report(top=numpy.int64(3)): ValueError
        "exporter/analytics/report.py",
        '("top", top, (SupportsIndex, type(None)), "an int or None"),',
        '("top", top, (int, type(None)), "an int or None"),',
        ("tests/sync/test_library.py::test_values_the_argument_checks_refused_though_they_worked",),
    ),
    Mutant(
        "rv21-events-appender-waits-for-a-pipe-reader",  # 30 s at each run's end, then killed
        "exporter/events/appender.py",
        "    stdout = sys.stdout.buffer\n",
        "    stdout = sys.stdout.buffer\n"
        "    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND))\n",
        (
            "tests/events/test_events.py::"
            "test_an_events_backfill_to_a_pipe_no_one_reads_does_not_hang",
        ),
    ),
    Mutant(
        "lakesoak-lost-answer-overwrite-taken-for-conflict",  # exit 6, the overwrite had landed
        "exporter/store/lake/tables.py",
        "            if landed is not None:\n                return landed\n",
        "",
        ("tests/lake/test_tables.py::test_a_table_write_whose_answer_was_lost_is_ours[projects]",),
    ),
    Mutant(
        "lakesoak-lost-answer-superseded-taken-for-another-writer",  # exit 4, no other writer
        "exporter/store/lake/tables.py",
        "            if record.num_rows and self._landed_write(SUPERSEDED, mark) is not None:\n"
        "                return  # its answer was lost: the retry met our own commit, not another's\n",
        "",
        (
            "tests/lake/test_tables.py::"
            "test_a_table_write_whose_answer_was_lost_is_ours[superseded]",
        ),
    ),
    Mutant(
        "lakesoak-in-flight-state-of-an-expired-holder-deleted",  # dataset broken: exit 6 after
        "exporter/store/lake/tables.py",
        "    return taken is not None and not taken.holder_is_dead(lease.machine)\n",
        "    return False\n",
        (
            "tests/lake/test_lease_lost.py::"
            "test_a_commit_landing_after_its_lease_was_taken_over_keeps_the_dataset_whole",
        ),
    ),
    Mutant(
        "s22url-opsaudit-config-read-over-the-commands-own",  # --config GOOD failed: exit 2
        "exporter/cli/__init__.py",
        "        if own_config and (config_file is None or from_env):\n",
        "        if own_config and config_file is None:\n",
        ("tests/ops/test_cli_boundary.py::test_a_commands_own_config_wins_over_opsaudit_config",),
    ),
    Mutant(
        "s22url-output-file-written-in-place",  # a failed -o write left a cut report
        "exporter/core/layout.py",
        "    if special or (mode is not None and not stat.S_ISREG(mode)):\n",
        "    if True:\n",
        (
            "tests/analytics/test_cli.py::"
            "test_an_output_file_whose_write_fails_keeps_its_previous_content",
        ),
    ),
    Mutant(
        "s22url-webhook-path-token-shown",  # Slack's /services/T/B/TOKEN in every warning
        "exporter/events/webhook.py",
        '    more = "/…" if m["rest"] not in ("", "/") else m["rest"]\n',
        '    more = m["rest"].partition("?")[0].partition("#")[0]\n',
        (f"{WEBHOOK}::test_a_webhook_urls_path_token_is_never_shown",),
    ),
    Mutant(
        "s22evf-events-file-appended-unlocked",  # a run cut another's append for a torn line
        "exporter/events/eventsfile.py",
        "        try:\n            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n            return\n",
        "        try:\n            return\n",
        (
            "tests/events/test_shared_file.py::"
            "test_two_data_directories_appending_to_one_file_cut_nothing_of_each_other",
        ),
    ),
    Mutant(
        "s22evf-child-appender-unlocked",  # the same, of an events backfill's child's appends
        "exporter/events/appender.py",
        "                locked(Path(path)) as (fd, _),\n",
        "                contextlib.nullcontext((os.open(path, os.O_WRONLY | os.O_APPEND), 0))"
        " as (fd, _),\n",
        (
            "tests/events/test_shared_file.py::"
            "test_two_data_directories_appending_to_one_file_cut_nothing_of_each_other",
        ),
    ),
    Mutant(
        "s22evf-rotated-file-appended-after-the-wait",  # lines the shipper had left behind
        "exporter/events/eventsfile.py",
        "            if _still_named(fd, path) or attempt + 1 == _REOPENS:\n",
        "            if True:\n",
        (
            "tests/events/test_shared_file.py::"
            "test_an_append_that_waited_for_a_file_rotated_meanwhile_goes_to_the_new_file",
        ),
    ),
    Mutant(
        "s22evf-summary-the-larger-sinks-count",  # "21 delivered (21 to the file, 0 to ...)"
        "exporter/engine/sync.py",
        "        if len(by_sink) < 2:\n",
        "        if True:\n",
        ("tests/events/test_events.py::test_cli_summary_says_each_sinks_count_with_both_sinks",),
    ),
    Mutant(
        "s22dd-file-on-the-data-dir-path-unnamed",  # sync exit 6, doctor 8, readers "run sync"
        "exporter/core/pathcheck.py",
        "        if not stat.S_ISDIR(mode):\n"
        '            return f"{shown}: {prefix} is a file, not a directory; {_FIX}"\n',
        "",
        (
            "tests/ops/test_cli_boundary.py::test_a_data_dir_no_sync_can_create_is_one_usage_error_for_every_command[sync-under-a-file]",
            "tests/ops/test_cli_boundary.py::test_a_data_dir_no_sync_can_create_is_one_usage_error_for_every_command[doctor-under-a-file]",
            "tests/ops/test_cli_boundary.py::test_a_data_dir_no_sync_can_create_is_one_usage_error_for_every_command[status-under-a-file]",
        ),
    ),
    Mutant(
        "s22dd-data-dir-file-check-left-to-each-command",  # the one place: the option's type
        "exporter/cli/_common.py",
        "        problem = data_dir_problem(path)\n",
        "        problem = None\n",
        (
            "tests/ops/test_cli_boundary.py::test_a_data_dir_no_sync_can_create_is_one_usage_error_for_every_command[sync-under-a-file]",
            "tests/ops/test_cli_boundary.py::test_a_data_dir_no_sync_can_create_is_one_usage_error_for_every_command[demo-symlink-loop]",
        ),
    ),
    Mutant(
        "s22dd-data-dir-under-a-file-library-says-missing",  # exporter.connect: "run sync"
        "exporter/core/errors.py",
        "        problem = data_dir_problem(data_dir)\n",
        "        problem = None\n",
        (
            "tests/ops/test_cli_boundary.py::"
            "test_a_data_dir_under_a_file_is_named_so_by_the_library_too",
        ),
    ),
    Mutant(
        "s22dd-data-dir-symlink-loop-a-bug",  # "unexpected error ... a bug", exit 5
        "exporter/core/pathcheck.py",
        "            if exc.errno == errno.ELOOP:\n",
        "            if False:\n",
        (
            "tests/ops/test_cli_boundary.py::test_a_data_dir_no_sync_can_create_is_one_usage_error_for_every_command[query SELECT 1-symlink-loop]",
            "tests/ops/test_cli_boundary.py::test_a_data_dir_no_sync_can_create_is_one_usage_error_for_every_command[sync-symlink-loop]",
        ),
    ),
    Mutant(
        "s22dd-data-dir-dangling-symlink-said-missing",  # readers: "run sync"; sync: exit 6
        "exporter/core/pathcheck.py",
        "            if exc.errno == errno.ENOENT and os.path.islink(prefix):\n",
        "            if False:\n",
        (
            "tests/ops/test_cli_boundary.py::test_a_data_dir_no_sync_can_create_is_one_usage_error_for_every_command[sync-dangling-symlink]",
            "tests/ops/test_cli_boundary.py::test_a_data_dir_no_sync_can_create_is_one_usage_error_for_every_command[report-dangling-symlink]",
        ),
    ),
    Mutant(
        "s22dd-data-dir-control-character-kept",  # a directory named "data\n", exit 0
        "exporter/core/pathcheck.py",
        '    if any(ch < " " or ch == "\\x7f" for ch in text):\n',
        "    if False:\n",
        (
            "tests/ops/test_cli_boundary.py::test_a_data_dir_no_sync_can_create_is_one_usage_error_for_every_command[status-trailing-newline]",
        ),
    ),
    Mutant(
        "s22dd-data-dir-tilde-kept",  # a folder named "~" in the working directory, exit 0
        "exporter/core/pathcheck.py",
        '    if text.startswith("~") and os.path.expanduser(text) != text:\n',
        "    if False:\n",
        (
            "tests/ops/test_cli_boundary.py::test_a_data_dir_no_sync_can_create_is_one_usage_error_for_every_command[status-tilde]",
        ),
    ),
    Mutant(
        "s22dd-data-dir-name-too-long-a-bug",  # "unexpected error (OSError ...)", exit 5
        "exporter/core/pathcheck.py",
        "    if code == errno.ENAMETOOLONG:\n",
        "    if False:\n",
        (
            "tests/ops/test_cli_boundary.py::test_a_data_dir_no_sync_can_create_is_one_usage_error_for_every_command[check-name-too-long]",
            "tests/ops/test_cli_boundary.py::test_a_data_dir_no_sync_can_create_is_one_usage_error_for_every_command[check-path-too-long]",
        ),
    ),
    Mutant(
        "s22lib-numpy-counts-refused",  # concurrency=np.int64(2): "is not an integer"
        "exporter/engine/settings.py",
        "            changes[f.name] = int(value)\n",
        "            pass\n",
        (
            "tests/sync/test_library.py::"
            "test_a_notebooks_own_types_are_taken_as_what_they_stand_for",
        ),
    ),
    Mutant(
        "s22lib-pathlike-data-dir-unread",  # an AttributeError ('strip') from deep inside
        "exporter/engine/settings.py",
        "            changes[f.name] = path\n",
        "            pass\n",
        (
            "tests/sync/test_library.py::"
            "test_a_notebooks_own_types_are_taken_as_what_they_stand_for",
        ),
    ),
    Mutant(
        "s22lib-connect-a-set-refused",  # connect({a, b}): "data_dir is set, not ..."
        "exporter/analytics/views.py",
        '"data_dir", data_dir, (str, os.PathLike, Iterable), expected',
        '"data_dir", data_dir, (str, os.PathLike, Sequence), expected',
        (
            "tests/sync/test_library.py::"
            "test_a_notebooks_own_types_are_taken_as_what_they_stand_for",
        ),
    ),
    Mutant(
        "s22lib-webhook-key-bytearray-kept",  # the caller's buffer, changed under the HMAC
        "exporter/events/config.py",
        "            self.webhook_key = bytes(self.webhook_key)",
        "            self.webhook_key = self.webhook_key",
        (
            "tests/sync/test_library.py::"
            "test_a_notebooks_own_types_are_taken_as_what_they_stand_for",
        ),
    ),
    Mutant(
        "s22perm-unlistable-data-dir-synced",  # exit 0 warning of opsaudit.duckdb; doctor: exit 8
        "exporter/store/local/dataset.py",
        "            fsync_dir(self.root)\n",
        "",
        (
            "tests/ops/test_not_a_bug.py::test_sync_refuses_a_dataset_it_may_not_list_as_doctor_finds_it",
            "tests/ops/test_not_a_bug.py::test_sync_says_permission_denied_as_every_command_does[0333]",
        ),
    ),
    Mutant(
        "s22perm-permission-told-to-free-space",  # sync's own words, or "free some space"
        "exporter/core/errors.py",
        "    if exc.errno in (errno.EACCES, errno.EPERM):\n",
        "    if False:\n",
        (
            "tests/ops/test_not_a_bug.py::test_sync_says_permission_denied_as_every_command_does[0555]",
            "tests/ops/test_not_a_bug.py::test_a_state_file_that_cannot_be_created_gets_the_advice_for_its_cause",
        ),
    ),
    Mutant(
        "s22perm-state-file-advice-for-every-errno",  # "Permission denied; free some space"
        "exporter/store/state.py",
        '            raise os_storage_error(path, exc, "cannot create the state file") from exc\n',
        '            raise StorageError(f"cannot create the state file {path}: free some space")\n',
        (
            "tests/ops/test_not_a_bug.py::test_a_state_file_that_cannot_be_created_gets_the_advice_for_its_cause",
        ),
    ),
    Mutant(
        "s22perm-library-symlink-loop-runtime-error",  # RuntimeError "Symlink loop from ..."
        "exporter/store/lake/location.py",
        "    except (OSError, RuntimeError) as exc:  # a symlink loop",
        "    except ZeroDivisionError as exc:  # a symlink loop",
        (
            "tests/ops/test_cli_boundary.py::test_a_data_dir_through_a_symlink_loop_is_named_so_by_the_library_too",
        ),
    ),
    Mutant(
        "s22readme-doctor-views-fix-contradicts-a-damaged-file",  # "meanwhile use opsaudit query"
        "exporter/ops/doctor.py",
        "    return not damaged\n",
        "    return True\n",
        (
            "tests/ops/test_doctor.py::test_an_operations_file_that_is_not_parquet_is_restored_from_a_backup",
        ),
    ),
    Mutant(
        "s22env-options-read-an-empty-variable-as-unset",  # cron's sync back-filled ./opsaudit-data
        "exporter/cli/_common.py",
        "                refuse_empty_variable(name, ctx)\n",
        "                pass\n",
        (
            "tests/ops/test_empty_environment.py::test_sync_with_an_empty_data_dir_variable_is_refused_and_creates_nothing[]",
            "tests/ops/test_empty_environment.py::test_an_empty_base_url_variable_is_refused_before_any_request",
        ),
    ),
    Mutant(
        "s22env-blank-variable-taken-as-a-value",  # OPSAUDIT_DATA_DIR=' ': "is empty", no name
        "exporter/cli/_common.py",
        "    if value is not None and not value.strip():\n",
        "    if value is not None and not value:\n",
        (
            "tests/ops/test_empty_environment.py::test_sync_with_an_empty_data_dir_variable_is_refused_and_creates_nothing[  \\t]",
        ),
    ),
    Mutant(
        "s22env-url-options-not-env-options",  # --data-dir, --base-url: empty read as unset
        "exporter/cli/_common.py",
        "class ConfiguredUrlOption(EnvOption):\n",
        "class ConfiguredUrlOption(click.Option):\n",
        (
            "tests/ops/test_empty_environment.py::test_every_option_with_a_variable_holds_to_the_rule",
            "tests/ops/test_empty_environment.py::test_readers_with_an_empty_data_dir_variable_are_refused[command0]",
        ),
    ),
    Mutant(
        "s22env-completion-refused-for-an-empty-variable",  # a traceback on Tab
        "exporter/cli/_common.py",
        "        if not ctx.resilient_parsing:  # shell completion: no error for a half-typed line\n",
        "        if True:\n",
        (
            "tests/ops/test_empty_environment.py::test_shell_completion_with_an_empty_variable_still_completes",
        ),
    ),
    Mutant(
        "s22env-empty-config-variable-read-as-unset",  # ./opsaudit.toml read instead
        "exporter/cli/__init__.py",
        '            refuse_empty_variable("OPSAUDIT_CONFIG", ctx)\n',
        "            pass\n",
        (
            "tests/ops/test_empty_environment.py::test_every_option_variable_set_but_empty_is_a_usage_error[OPSAUDIT_CONFIG]",
            "tests/ops/test_empty_environment.py::test_check_with_an_empty_variable_writes_not_ok",
        ),
    ),
    Mutant(
        "s22env-empty-config-variable-over-the-commands-own",  # `status --config F` refused
        "exporter/cli/__init__.py",
        "        if not own_config and not ctx.meta.get(HELP_ASKED) and (config_file is None or from_env):\n",
        "        if not ctx.meta.get(HELP_ASKED) and (config_file is None or from_env):\n",
        (
            "tests/ops/test_empty_environment.py::test_an_empty_config_variable_gives_way_to_a_commands_own_config",
        ),
    ),
    Mutant(
        "s22env-empty-key-variable-not-said",  # "set NEON_API_KEY" to one who had set it
        "exporter/cli/_common.py",
        "    if from_env is not None and not from_env.strip():\n",
        "    if False:\n",
        (
            "tests/ops/test_empty_environment.py::test_an_empty_key_variable_is_no_key_and_says_it_is_set[]",
        ),
    ),
    Mutant(
        "s22env-empty-lease-ttl-read-as-unset",  # the default 120 s, silently
        "exporter/store/lake/store.py",
        "    if not raw.strip():  # as every variable the command line reads (cli._common)\n",
        "    if False:\n",
        ("tests/ops/test_empty_environment.py::test_an_empty_lease_ttl_variable_is_refused",),
    ),
    Mutant(
        "s22misc-hidden-option-suggested",  # sync --log-fmt: "Did you mean --clock-offset"
        "exporter/cli/_group.py",
        "        if isinstance(param, click.Option) and not param.hidden\n",
        "        if isinstance(param, click.Option)\n",
        ("tests/ops/test_cli_boundary.py::test_a_mistyped_option_is_never_told_a_hidden_one",),
    ),
    Mutant(
        "s22misc-lease-ttl-read-after-the-marker",  # a bad value: exit 2, the prefix initialised
        "exporter/store/lake/store.py",
        "        ttl = lease_ttl() if lock else DEFAULT_TTL\n"
        "        self.ds = LakeDataset.open(location, create=True)\n",
        "        self.ds = LakeDataset.open(location, create=True)\n"
        "        ttl = lease_ttl() if lock else DEFAULT_TTL\n",
        (
            "tests/lake/test_sync_lake.py::test_a_bad_lease_ttl_is_refused_before_anything_is_written",
        ),
    ),
    Mutant(
        "s22misc-views-warning-bare-error",  # "[Errno 1] Operation not permitted: '...tmp'"
        "exporter/analytics/views.py",
        "        print(failure(Path(argv[0]).resolve(), exc), file=sys.stderr)\n",
        "        print(_first_line(exc), file=sys.stderr)\n",
        (
            "tests/ops/test_not_a_bug.py::test_a_views_database_another_user_owns_is_named_with_the_fix",
            "tests/ops/test_not_a_bug.py::test_a_data_file_the_views_may_not_read_is_named_with_the_fix",
        ),
    ),
    Mutant(
        "s22misc-views-writer-killed-unsaid",  # "could not refresh opsaudit.duckdb: exit code -9"
        "exporter/analytics/views_db.py",
        "    if done.returncode < 0:  # killed: by the kernel's OOM killer, mostly\n",
        "    if False:\n",
        ("tests/sync/test_views_refresh.py::test_a_views_writer_killed_is_said_so",),
    ),
    Mutant(
        "s22rev-output-file-refused-beside-a-locked-directory",  # -o: "Permission denied", exit 2
        "exporter/core/layout.py",
        "    except PermissionError:\n        if mode is None:\n",
        "    except OSError:\n        if True:\n",
        (
            "tests/ops/test_not_a_bug.py::"
            "test_output_file_this_user_may_write_is_written_whatever_its_directory_allows",
        ),
    ),
    Mutant(
        "s22rev-mutants-killed-leave-their-copies",  # CI's trap: tests ran on, /dev/shm filled
        "scripts/mutants.py",
        "            proc.kill()\n",
        "            pass\n",
        (
            "tests/test_mutants_apply.py::"
            "test_a_run_killed_by_sigterm_leaves_no_copy_and_no_test_running",
        ),
    ),
    Mutant(
        "s22lake-superseded-cleanup-lost-answer-fails-the-run",  # our own delete: exit 6
        "exporter/store/lake/tables.py",
        "            fresh = self._record_without(version)\n",
        "            fresh = None\n",
        (
            "tests/lake/test_superseded_lake.py::test_the_cleanup_of_a_killed_attempt_whose_answer_is_lost",
        ),
    ),
    Mutant(
        "s22lake-doctor-expired-lease-shown-running",  # an operator waits for a killed run
        "exporter/ops/doctor_lake.py",
        "    if info.is_free(now):  # by this machine's clock\n",
        "    if False:\n",
        ("tests/lake/test_doctor_lake.py::test_a_held_lease_and_one_left_by_a_killed_holder",),
    ),
    Mutant(
        "s22lake-lease-lost-after-commits-said-before-any",  # "stopping before any commit"
        "exporter/store/lake/store.py",
        "        if self._txn <= self._restored:\n",
        "        if True:\n",
        (
            "tests/lake/test_lease_lost.py::test_a_writer_stalled_past_its_lease_whose_commit_landed_first_says_so",
        ),
    ),
    Mutant(
        "s22-webhook-path-at-sign-taken-for-userinfo",  # /services/abc@TOKEN shown as the host
        "exporter/events/webhook.py",
        '    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]\n',
        '    authority = rest.partition("?")[0].partition("#")[0]\n',
        (f"{WEBHOOK}::test_an_at_sign_after_a_webhook_urls_host_is_no_userinfo",),
    ),
    Mutant(
        "s22-group-typo-leaves-check-verdict",  # opsaudit --typo check: ok 1 stood
        "exporter/cli/_group.py",
        "            not_run(ctx)  # `opsaudit --typo check`: check's verdict is not ok\n",
        "            pass\n",
        ("tests/ops/test_metrics.py::test_a_check_whose_group_config_fails_writes_not_ok",),
    ),
    Mutant(
        "s23-events-file-on-a-filesystem-without-locks-never-appended",  # events wait for ever
        "exporter/events/eventsfile.py",
        "            if exc.errno not in _CANNOT_LOCK:\n",
        "            if True:\n",
        (
            "tests/events/test_shared_file.py::"
            "test_a_file_whose_filesystem_cannot_lock_is_appended_with_a_warning",
        ),
    ),
    Mutant(
        "s23-events-file-lock-waited-for-ever",  # a stuck lock holder hangs every run
        "exporter/events/eventsfile.py",
        "        elif time.monotonic() >= until:\n",
        "        elif False:\n",
        (
            "tests/events/test_shared_file.py::"
            "test_a_lock_held_past_the_wait_fails_the_append_and_names_why",
        ),
    ),
    Mutant(
        "s23-empty-config-variable-hides-the-help",  # `sync --help` exit 2
        "exporter/cli/__init__.py",
        "        if not own_config and not ctx.meta.get(HELP_ASKED) and (config_file is None or from_env):\n",
        "        if not own_config and (config_file is None or from_env):\n",
        (
            "tests/ops/test_empty_environment.py::"
            "test_help_is_shown_whatever_variable_is_set_but_empty",
        ),
    ),
    Mutant(
        "s23out-escapes-stripped-from-piped-output",  # csv to a pipe lost "\x1b[31m" of values
        "exporter/cli/_stdout.py",
        "            click.echo(text, nl=False, color=True)  # encoded whole before any is written\n",
        "            click.echo(text, nl=False)\n",
        ("tests/analytics/test_output_values.py::test_escapes_reach_a_pipe_as_they_are_stored",),
    ),
    Mutant(
        "s23out-window-bounds-read-two-nows",  # --since 7d --until 7d: an empty report, exit 0
        "exporter/cli/_query.py",
        "    window_until = parse_until(until, now=now) if until else None\n",
        "    window_until = parse_until(until) if until else None\n",
        ("tests/analytics/test_cli.py::test_report_same_duration_twice_is_an_empty_range",),
    ),
    Mutant(
        "s23out-table-width-in-characters",  # a Japanese name pushed the columns out of line
        "exporter/analytics/format.py",
        "    if value.isascii():\n",
        "    if True:\n",
        ("tests/analytics/test_output_values.py::test_a_table_lines_up_wide_characters",),
    ),
    Mutant(
        "s23out-window-offset-past-a-day",  # --since ...+53:00: a window moved by two days
        "exporter/core/timeutil.py",
        "    if offset and (int(offset[1:3]) > 23 or int(offset[-2:]) > 59):\n",
        "    if False:\n",
        (
            "tests/analytics/test_cli.py::test_report_offset_out_of_range_is_a_usage_error",
            "tests/ops/test_check.py::test_an_as_of_at_the_end_of_the_calendar_is_a_usage_error",
        ),
    ),
    Mutant(
        "s23-control-characters-sent-to-the-terminal",  # an error text cleared the screen
        "exporter/analytics/format.py",
        "    out = escape_controls(out)  # on a terminal and in Markdown (core.errors)\n",
        "",
        ("tests/analytics/test_output_values.py::test_a_table_shows_control_characters_escaped",),
    ),
    Mutant(
        "s23mon-failed-run-after-budgeted-ones-reads-never-succeeded",  # stale_sync at once
        "exporter/core/model.py",
        "        elif outcome == Outcome.OK and whole(started, ended):\n",
        "        elif not (decided := True) or (outcome == Outcome.OK and whole(started, ended)):\n",
        (
            "tests/sync/test_budget_runs.py::"
            "test_a_failed_or_partial_run_after_budgeted_runs_keeps_the_trail_current",
        ),
    ),
    Mutant(
        "s23mon-partial-run-after-a-failed-listing-makes-the-trail-current",  # its walks count
        "exporter/core/model.py",
        "                successes.append(min(oldest, ended))\n",
        "                successes.append(oldest)\n",
        (
            "tests/sync/test_budget_runs.py::"
            "test_a_failed_or_partial_run_after_budgeted_runs_keeps_the_trail_current",
        ),
    ),
    Mutant(
        "s23mon-project-run-after-budgeted-ones-reads-never-succeeded",  # a scoped ok run
        "exporter/core/model.py",
        "        elif outcome == Outcome.OK and whole(started, ended):\n",
        "        elif outcome == Outcome.OK and (whole(started, ended) or not (decided := True)):\n",
        (
            "tests/sync/test_budget_runs.py::"
            "test_a_failed_or_partial_run_after_budgeted_runs_keeps_the_trail_current",
        ),
    ),
    Mutant(
        "s23-killed-runs-counts-published",  # "0 requests" of a run that made hundreds
        "exporter/ops/metrics.py",
        "    if last is not None and last.finished_at is not None:\n",
        "    if last is not None:\n",
        ("tests/ops/test_metrics.py::test_a_killed_run_is_the_last_run_in_the_metrics",),
    ),
    Mutant(
        "s23-help-as-a-value-lets-the-empty-config-by",  # `sync --project --help`: a sync
        "exporter/cli/_config.py",
        "    if value is None and ctx.meta.get(HELP_ASKED):\n",
        "    if False:\n",
        (
            "tests/ops/test_empty_environment.py::"
            "test_help_as_an_options_value_leaves_the_empty_config_refused",
        ),
    ),
    Mutant(
        "s23rev-table-heading-control-characters-sent-to-the-terminal",  # a PIVOT's ESC
        "exporter/analytics/format.py",
        "    columns = _headings(columns)\n",
        "",
        (
            "tests/analytics/test_output_values.py::"
            "test_a_heading_from_the_data_shows_control_characters_escaped",
        ),
    ),
    Mutant(
        "s23rev-markdown-heading-control-characters-kept",  # a PIVOT's ESC in the Markdown
        "exporter/analytics/format.py",
        '" | ".join(escape(c) for c in _headings(columns))',
        '" | ".join(escape(c) for c in columns)',
        (
            "tests/analytics/test_output_values.py::"
            "test_a_heading_from_the_data_shows_control_characters_escaped",
        ),
    ),
    Mutant(
        "s23rev-table-width-of-marks-by-combining-class",  # a Thai name out of line by one
        "exporter/analytics/format.py",
        '    if kind in ("Mn", "Me") or (kind == "Cf" and c != "\\u00ad") or "\\u1160" <= c <= "\\u11ff":\n',
        "    if unicodedata.combining(c):\n",
        (
            "tests/analytics/test_output_values.py::test_a_table_gives_marks_that_take_no_column_none",
        ),
    ),
    Mutant(
        "s23rev-a-typo-of-a-date-called-an-offset",  # '2025-01-3199': "no such UTC offset"
        "exporter/core/timeutil.py",
        "    parsed = _RFC3339.match(text.strip())\n",
        '    parsed = re.search(r"()()()()()()()([+-]\\d{2}:?\\d{2})\\s*$", text)\n',
        ("tests/analytics/test_cli.py::test_a_typo_that_is_no_time_is_not_called_an_offset",),
    ),
    Mutant(
        "s23-server-control-characters-stored-as-sent",  # check's output cleared the screen
        "exporter/api/client.py",
        "    return escape_controls(redact(text))[:limit]\n",
        "    return redact(text)[:limit]\n",
        ("tests/sync/test_http.py::test_a_servers_control_characters_are_escaped_in_the_error",),
    ),
    Mutant(
        "s23-no-action-labelled-none",  # action="None": one action more on every dashboard
        "exporter/ops/metrics.py",
        '        label = "" if action is None else str(action)\n',
        "        label = str(action)\n",
        (
            "tests/sync/test_robustness.py::"
            "test_an_operation_without_an_action_has_an_empty_action_label",
        ),
    ),
    Mutant(
        "s23-check-findings-control-characters-sent",  # a branch name's ESC coloured the terminal
        "exporter/ops/check.py",
        '        return escape_controls(f"{self.check}: {self.message}")\n',
        '        return f"{self.check}: {self.message}"\n',
        (
            "tests/analytics/test_output_values.py::test_checks_findings_show_control_characters_escaped",
        ),
    ),
    Mutant(
        "s24mon-deleted-projects-operations-stuck",  # stuck > 0 never cleared
        "sql/40_stuck.sql",
        "  AND (deleted OR p.deleted_at IS NULL)\n",
        "",
        ("tests/ops/test_check.py::test_a_deleted_projects_open_operations_are_not_stuck",),
    ),
    Mutant(
        "s24mon-killed-run-missing-from-sync-runs",  # the view said ok after a kill -9
        "exporter/store/local/reader.py",
        "            out[SYNC_RUNS_FILE] = runs\n",
        "            pass\n",
        ("tests/sync/test_status.py::test_sync_runs_and_the_report_show_a_killed_run_killed",),
    ),
    Mutant(
        "s24req-retry-not-charged-to-the-request-budget",  # --max-requests 12 sent 68
        "exporter/engine/sync.py",
        "        client.charge_retry = self.budget.take_retry\n",
        "",
        (
            "tests/sync/test_budget_runs.py::test_a_request_budget_counts_every_retry",
            "tests/sync/test_budget_runs.py::"
            "test_a_walk_cut_by_a_retry_the_request_budget_refused_resumes_from_its_cursor",
        ),
    ),
    Mutant(
        "s24req-retry-charge-takes-nothing",  # the retry checked against the budget, not taken
        "exporter/engine/budget.py",
        "            if unspent is None:\n                self.requests_left -= 1\n",
        "",
        ("tests/sync/test_budget_runs.py::test_a_request_budget_counts_every_retry",),
    ),
    Mutant(
        "s24req-listing-retry-not-charged",  # the listing's 503s retried 12 times under a cap of 5
        "exporter/engine/sync.py",
        "        client.charge_retry = lambda: self.budget.take_retry(client.stats.requests)\n",
        "",
        (
            "tests/sync/test_budget_runs.py::"
            "test_a_retry_of_the_listing_the_request_budget_no_longer_covers_ends_the_run_budget",
        ),
    ),
    Mutant(
        "s24req-listing-retries-not-spent",  # its retries left out: the walks sent one more
        "exporter/engine/sync.py",
        "        self.budget.spend(client.stats.requests)\n",
        "        self.budget.spend(found.listing_requests)\n",
        (
            "tests/sync/test_budget_runs.py::"
            "test_the_listings_retries_do_not_count_against_the_least_request_budget",
        ),
    ),
    Mutant(
        "s24chk-left-out-projects-unexplained",  # --org-id runs: B's projects flagged, no reason
        "exporter/ops/check.py",
        "            if not error and newest_start is not None and _when(newest_start) > current:\n",
        "            if False:\n",
        ("tests/ops/test_check.py::test_projects_a_scoped_run_left_out_say_so",),
    ),
    Mutant(
        "s24chk-stale-trail-unexplained",  # a scoped run seconds ago, 'last successful sync 3h'
        "exporter/ops/check.py",
        "        if newest_start is not None and _when(newest_start) > report.last_success_at:\n",
        "        if False:\n",
        ("tests/ops/test_check.py::test_projects_a_scoped_run_left_out_say_so",),
    ),
    Mutant(
        "s24q-query-reads-again-after-rows-reached-stdout",  # the first rows printed twice
        "exporter/cli/_rows.py",
        "            return not self._written\n",
        "            return True\n",
        (
            "tests/analytics/test_query_stream.py::"
            "test_a_file_deleted_after_rows_reached_stdout_fails_with_exit_9",
        ),
    ),
    Mutant(
        "s24q-query-holds-the-whole-result",  # 3M rows as jsonl: 11 GiB, the first row at the end
        "exporter/cli/_rows.py",
        "        for piece in render_batches(columns, batches, fmt):\n",
        '        for piece in ["".join(render_batches(columns, list(batches), fmt))]:\n',
        (
            "tests/analytics/test_query_stream.py::"
            "test_rows_reach_a_pipe_before_the_last_file_is_read",
        ),
    ),
    Mutant(
        "s24q-o-file-not-taken-back-before-reading-again",  # -o FILE: rows twice
        "exporter/core/output.py",
        "        self._fh.seek(0)\n        self._fh.truncate()\n",
        "",
        (
            "tests/analytics/test_query_stream.py::"
            "test_o_file_reads_again_when_a_sync_compacts_under_it",
        ),
    ),
    Mutant(
        "s24lake-killed-run-missing-from-lake-sync-runs",  # query/report: last run ok after kill
        "exporter/store/lake/reader.py",
        "        settled = runs() if runs is not None and name == SYNC_RUNS else None\n",
        "        settled = None\n",
        (
            "tests/lake/test_sync_lake.py::"
            "test_sync_runs_and_the_report_show_killed_and_refused_runs_at_once_on_s3",
        ),
    ),
    Mutant(
        "s24ev-secret-given-as-its-path-echoed",  # the secret printed in the usage error
        "exporter/events/webhook.py",
        "if isinstance(exc, FileNotFoundError) and _looks_like_a_secret(str(path)):",
        "if False:",
        ("tests/events/test_webhook.py::test_a_secret_given_for_its_files_path_is_never_shown",),
    ),
    Mutant(
        "s24ev-webhook-answer-read-whole",  # a receiver's 400 MiB answer held in each lane
        "exporter/events/delivery.py",
        "response.read(_ANSWER_BYTES)",
        "response.read()",
        ("tests/events/test_webhook.py::test_a_receivers_large_answer_is_not_read_into_memory",),
    ),
    Mutant(
        "s24ev-retry-wait-past-the-budget",  # the run slept 8 s past its budget and grace
        "exporter/events/delivery.py",
        "if self.stop.wait(self._within_deadline(wait)):",
        "if self.stop.wait(wait):",
        ("tests/events/test_events.py::test_a_retrys_wait_ends_with_the_time_budget",),
    ),
    Mutant(
        "s24key-key-given-as-its-path-echoed",  # --api-key-file "$NEON_API_KEY": the key printed
        "exporter/core/errors.py",
        "    if isinstance(exc, FileNotFoundError) and (\n",
        "    if False and (\n",
        ("tests/sync/test_robustness.py::test_a_key_given_for_its_files_path_is_never_shown",),
    ),
    Mutant(
        "s24small-delta-log-prefix-accepted",  # s3://b/t/_delta_log: exit 6 for good, objects left
        "exporter/store/lake/location.py",
        '    if "_delta_log" in segments:\n',
        "    if False:\n",
        (
            "tests/lake/test_bad_input.py::"
            "test_a_prefix_inside_a_delta_log_is_refused_before_anything_is_written",
            "tests/lake/test_location.py::test_a_prefix_inside_a_delta_log_is_refused",
        ),
    ),
    Mutant(
        "s24small-dataset-compared-as-typed",  # s3://b/pct%20x and s3://b/pct x read as two
        "exporter/store/readers.py",
        "            key = loc.identity",
        '            key = loc.display.rstrip("/")',
        (
            "tests/lake/test_read_together.py::"
            "test_a_dataset_given_twice_is_refused_however_its_prefix_is_spelled",
        ),
    ),
    Mutant(
        "s24small-backlog-asks-for-a-receiver",  # the events file alone waits: "receiver down?"
        "exporter/ops/check.py",
        "{_why_waiting(sinks)} the next sync",
        "is the receiver down? the next sync",
        (
            "tests/events/test_discard.py::"
            "test_a_dropped_sinks_backlog_is_discarded_and_the_other_sinks_kept",
            "tests/events/test_events.py::"
            "test_receiver_down_for_a_whole_run_loses_nothing_and_check_reports_it",
        ),
    ),
    Mutant(
        "s24rev-run-ended-between-the-state-reads",  # sync_runs `VALUES ()`: queries exit 7
        "exporter/store/local/reader.py",
        "    if not unrecorded:  # it ended between the two reads: the file has it, or will\n",
        "    if False:\n",
        ("tests/sync/test_status.py::test_sync_runs_read_as_a_run_ends_between_the_state_reads",),
    ),
    Mutant(
        "s24rev-closed-stdout-taken-for-a-bug",  # `report | true`: "a bug in opsaudit", exit 5
        "exporter/cli/_stdout.py",
        "    except BrokenPipeError:\n        reader_gone()\n\n\ndef reader_gone() -> NoReturn:",
        "    except ZeroDivisionError:\n        reader_gone()\n\n\ndef reader_gone() -> NoReturn:",
        (
            "tests/analytics/test_query_stream.py::"
            "test_a_reader_gone_before_anything_was_written_ends_141",
        ),
    ),
    Mutant(
        "s24err-cut-rows-under-exit-7-unsaid",  # 2.9M rows printed, then exit 7: taken as whole
        "exporter/cli/_rows.py",
        "        if not out.printed:\n            raise\n",
        "        raise\n",
        (
            "tests/analytics/test_query_stream.py::"
            "test_an_error_after_rows_were_printed_says_they_are_incomplete",
        ),
    ),
    Mutant(
        "s24chk-failing-project-said-left-out",  # walked and failed, yet "the runs left it out"
        "exporter/ops/check.py",
        "            if not error and newest_start is not None and _when(newest_start) > current:\n",
        "            if newest_start is not None and _when(newest_start) > current:\n",
        ("tests/ops/test_check.py::test_a_project_failing_since_is_not_said_left_out",),
    ),
    Mutant(
        "s24out-dev-stdout-cut-by-a-whole-output",  # report/table -o /dev/stdout: header lost
        "exporter/core/layout.py",
        '        with open(path, "ab") as fh:\n            fh.write(data)\n        return\n',
        '        with open(path, "wb") as fh:\n            fh.write(data)\n        return\n',
        (
            "tests/analytics/test_query_stream.py::"
            "test_o_dev_stdout_writes_after_what_the_shell_wrote_before",
        ),
    ),
    Mutant(
        "s24out-dev-stdout-cut-by-streamed-rows",  # query --format csv -o /dev/stdout
        "exporter/core/output.py",
        '            return open(self.path, "ab")\n',
        '            return open(self.path, "wb")\n',
        (
            "tests/analytics/test_query_stream.py::"
            "test_o_dev_stdout_writes_after_what_the_shell_wrote_before",
        ),
    ),
    Mutant(
        "empty-state-file-taken-for-a-new-dataset",  # the history started again, exit 0
        "exporter/core/layout.py",
        '    if has_state(root) or not any_file(root / VERSIONS_DIR, "*/*.parquet"):\n',
        '    if (root / STATE_FILE).exists() or not any_file(root / VERSIONS_DIR, "*/*.parquet"):\n',
        (f"{STORAGE}::test_data_beside_an_empty_state_file_is_refused",),
    ),
    Mutant(
        "data-dir-credentials-past-a-slash-shown",  # s3://KEY:SE/CRET@bucket: printed whole
        "exporter/store/lake/location.py",
        '    if "@" in authority or (scheme != "file" and "@" in rest):\n',
        '    if "@" in authority:\n',
        (
            "tests/lake/test_location.py::test_credentials_holding_a_slash_or_a_hash_are_refused_unshown",
        ),
    ),
    Mutant(
        "refused-data-dir-shows-its-query",  # https://...?sig=SAS: the token printed
        "exporter/store/lake/location.py",
        '    return re.split(r"[?#]", tail, maxsplit=1)[0]\n',
        "    return tail\n",
        (
            "tests/lake/test_location.py::test_a_refused_url_is_shown_without_its_query_or_user_info",
        ),
    ),
    Mutant(
        "unreachable-endpoint-shows-its-query",  # ?X-Token=...: printed
        "exporter/store/lake/objects.py",
        "urlsplit(endpoint)._replace(path='', query='', fragment='').geturl()",
        "redact(endpoint)",
        ("tests/lake/test_bad_input.py::test_an_unreachable_endpoint_is_shown_without_its_query",),
    ),
    Mutant(
        "storage-error-body-unscrubbed",  # a 500's body quoting the SAS: printed
        "exporter/store/lake/objects.py",
        "    first = scrubbed(text.splitlines()[0] if text else type(exc).__name__, location)[:300]\n",
        "    first = redact(text.splitlines()[0] if text else type(exc).__name__)[:300]\n",
        (
            "tests/lake/test_bad_input.py::test_a_storage_error_quotes_no_credential_of_the_environment",
        ),
    ),
    Mutant(
        "endpoint-option-unchecked",  # minio:9000: a Rust panic, exit 1
        "exporter/store/lake/location.py",
        "    if bare in _URL_OPTIONS and not _endpoint_ok(value):\n",
        "    if False:\n",
        (
            "tests/lake/test_location.py::test_a_bad_value_of_a_typed_option_names_the_option_not_the_value",
        ),
    ),
    Mutant(
        "rust-panic-escapes-the-group",  # a traceback and exit 1, "partial"
        "exporter/cli/_group.py",
        "            if isinstance(error, (SystemExit, GeneratorExit)):\n",
        "            if True:\n",
        ("tests/ops/test_unexpected_error.py::test_a_rust_panic_is_an_unexpected_error",),
    ),
    Mutant(
        "lease-expiry-by-the-takers-clock",  # a machine 300 s ahead took a live sync's lease
        "exporter/store/lake/lease.py",
        "            or current.is_free(self.store_now(), self.grace)\n",
        "            or current.is_free(self.clock(), self.grace)\n",
        (
            "tests/lake/test_lease.py::test_a_taker_whose_clock_is_off_judges_expiry_by_the_stores_clock",
        ),
    ),
    Mutant(
        "table-conflict-after-takeover-exit-6",  # the lease lost, told as a storage error
        "exporter/store/lake/tables.py",
        "            if lease is None or not isinstance(exc, dl.exceptions.CommitFailedError):\n",
        "            if True:\n",
        (
            "tests/lake/test_lease_lost.py::test_a_table_write_conflicting_with_the_writer_that_took_the_lease_exits_4",
        ),
    ),
    Mutant(
        "reader-judges-a-lease-by-its-own-clock",  # reader 300 s ahead: a live run `killed`
        "exporter/store/readers.py",
        "    grace = READER_CLOCK_GRACE\n",
        "    grace = timedelta(seconds=5)\n",
        ("tests/lake/test_lease.py::test_a_reader_whose_clock_is_ahead_shows_a_live_run_running",),
    ),
    Mutant(
        "storage-option-words-unchecked",  # SSE=bogus: exit 6 quoting the value
        "exporter/store/lake/location.py",
        "    words = _WORD_OPTIONS.get(bare)\n",
        "    words = None\n",
        (
            "tests/lake/test_location.py::test_a_bad_value_of_a_typed_option_names_the_option_not_the_value",
        ),
    ),
    Mutant(
        "page-served-again-walked",  # same page under new cursors: stored again, or for ever
        "exporter/api/paging.py",
        "            if ids and self._previous is not None and ids <= self._previous:\n",
        "            if False:\n",
        (f"{ROBUST}::test_the_same_page_served_again_under_a_new_cursor_fails_the_project[3]",),
    ),
    Mutant(
        "overlap-previous-is-the-kept-ids",  # a page of repeats emptied it: the next stored twice
        "exporter/engine/walk.py",
        "            taken: set[str] = set()  # `ids` stays the page's: not kept ids (stored twice)\n",
        "            taken = ids = set()\n",
        (f"{ROBUST}::test_a_page_of_repeats_is_compared_with_the_whole_page_before",),
    ),
    Mutant(
        # msgspec < 0.23 raises UnicodeDecodeError for a byte that is not UTF-8, 0.23 its own
        # DecodeError (which made dropping UnicodeDecodeError alone an equivalent mutant under
        # CI's fresh install): the clause as a whole is what each version needs.
        "undecodable-page-a-bug",  # exit 5, every project after it lost
        "exporter/api/client.py",
        "        except (msgspec.DecodeError, UnicodeDecodeError):\n",
        "        except UnicodeDecodeError:\n",
        (f"{ROBUST}::test_a_page_that_is_not_utf8_is_retried_then_fails_its_project_alone",),
    ),
    Mutant(
        "retry-after-date-ignored",  # backoff instead: 8 attempts of 429 in 42 s
        "exporter/api/client.py",
        "        until = _http_date(value)\n",
        "        until = None\n",
        (
            "tests/sync/test_http.py::test_a_retry_after_date_is_waited_out_from_the_servers_date",
            "tests/sync/test_http.py::"
            "test_a_retry_after_date_past_the_retry_budget_fails_the_request_at_once",
        ),
    ),
    Mutant(
        "projects-short-page-taken-for-the-last",  # capped at 100: the rest unsynced, deleted
        "exporter/api/discovery.py",
        "short_pages=PROJECTS_SHORT_PAGES",
        "short_pages=()",
        ("tests/sync/test_scale.py::test_a_listing_paged_below_its_limit_is_read_to_its_end",),
    ),
    Mutant(
        "projects-page-of-ten-followed",  # exactly 10 projects: a listing request more each run
        "exporter/api/discovery.py",
        "PROJECTS_SHORT_PAGES = (PROJECTS_PAGE_FALLBACK,)\n",
        "PROJECTS_SHORT_PAGES = (PROJECTS_PAGE_FALLBACK, 10)\n",
        (
            "tests/sync/test_scale.py::"
            "test_an_organization_of_exactly_ten_projects_lists_in_one_request",
        ),
    ),
    Mutant(
        "branches-page-served-again-read",  # the same branch under new cursors: a hang
        "exporter/engine/walk.py",
        "                if cursor is not None and ids and ids <= listed:\n",
        "                if False:\n",
        (f"{ROBUST}::test_the_same_branches_page_served_again_fails_the_project",),
    ),
    Mutant(
        "404-pair-drops-open-operations",  # back in the listing: old state for good, exit 0
        "exporter/engine/walk.py",
        "        self.chunk = Chunk(self.pid, deleted_us=self.clock())\n",
        "        self.chunk = Chunk(self.pid, deleted_us=self.clock(), open_deletes=set(self.open))\n",
        (
            "tests/sync/test_failures.py::"
            "test_a_404_pair_of_a_listed_project_keeps_its_open_operations_tracked",
        ),
    ),
    Mutant(
        "empty-report-without-freshness",  # `report --since 1d`: nothing of the last sync
        "exporter/analytics/report_text.py",
        '        out.append(_block([("Data", freshness_text(report))], fmt))\n',
        "",
        ("tests/analytics/test_cli.py::test_report_window_with_no_match_still_says_how_fresh",),
    ),
    Mutant(
        "empty-html-page-without-freshness",
        "exporter/analytics/html.py",
        '        parts.append(_rows_table([("Data", freshness_text(report))]))\n',
        "",
        ("tests/analytics/test_cli.py::test_report_window_with_no_match_still_says_how_fresh",),
    ),
    Mutant(
        "demo-prints-a-relative-data-dir",  # the notebook, run in notebooks/, finds no data
        "exporter/cli/_demo.py",
        "    data = result.data_dir.absolute()\n",
        "    data = result.data_dir\n",
        ("tests/test_demo.py::test_a_relative_data_dir_is_printed_absolute_for_the_notebook",),
    ),
    Mutant(
        "demo-prints-relative-plots",  # the PNGs land in notebooks/plots
        "exporter/cli/_demo.py",
        '    plots = Path.cwd() / "plots"\n',
        '    plots = Path("plots")\n',
        ("tests/test_demo.py::test_a_relative_data_dir_is_printed_absolute_for_the_notebook",),
    ),
    Mutant(
        "sql-not-utf8-a-bug",  # Latin-1 SQL from -f or stdin: exit 5, "a bug in opsaudit"
        "exporter/cli/_query.py",
        "    except UnicodeError:\n",
        "    except UnicodeEncodeError:\n",
        ("tests/analytics/test_cli.py::test_query_sql_not_utf8_is_a_usage_error",),
    ),
    Mutant(
        "sql-argument-surrogates-unchecked",  # DuckDB's parser: TypeError, exit 5
        "exporter/cli/_query.py",
        '        sql.encode("utf-8")',
        '        sql.encode("utf-8", "surrogateescape")',
        ("tests/analytics/test_cli.py::test_query_sql_not_utf8_is_a_usage_error",),
    ),
    Mutant(
        "output-unencodable-crashes",  # Latin-1 terminal, '\u2026' of a cut cell: exit 5
        "exporter/cli/_stdout.py",
        '            replaced = exc.object.encode(exc.encoding, "replace").decode(exc.encoding)\n',
        "            raise\n",
        ("tests/analytics/test_cli.py::test_a_terminal_without_the_ellipsis_gets_a_question_mark",),
    ),
    Mutant(
        "usage-error-keeps-last-verdict",  # check --metrics-file --fail-on BAD: ok 1 left
        "exporter/cli/_ops.py",
        '            write_unjudged_check(path, self._readable(ctx, given, "as_of"))\n',
        "            pass\n",
        ("tests/ops/test_metrics.py::test_a_check_refused_for_its_options_writes_not_ok",),
    ),
    Mutant(
        "empty-account-walked-in-full",  # status of no projects: synced_within_hour 1.0
        "exporter/store/state.py",
        "return self.within_hour / self.projects if self.projects else None",
        "return self.within_hour / self.projects if self.projects else 1.0",
        (
            "tests/sync/test_status.py::test_status_of_an_account_without_projects_claims_no_coverage",
        ),
    ),
    Mutant(
        "empty-account-coverage-line",  # "0 projects, 100% walked within the hour"
        "exporter/ops/status.py",
        '        if not c["projects"]\n',
        "        if False\n",
        (
            "tests/sync/test_status.py::test_status_of_an_account_without_projects_claims_no_coverage",
        ),
    ),
    Mutant(
        "walked-projects-left-unsaid",  # budget: "0/4 projects; 4 left", 2 of them walked
        "exporter/engine/sync.py",
        "ProjectResult(walk.result, error, left=left, names_left=left, unknown=unknown)",
        "ProjectResult(walk.result, error, left=left, unknown=unknown)",
        (
            "tests/sync/test_budget_runs.py::"
            "test_a_run_says_which_projects_it_left_were_walked_and_only_wait_for_their_names",
        ),
    ),
    Mutant(
        "environment-endpoint-unchecked",  # AWS_ENDPOINT_URL=minio:9000: a panic, exit 5
        "exporter/store/lake/objects.py",
        "        check_environment(location, os.environ)\n",
        "",
        (
            "tests/lake/test_location.py::"
            "test_a_bad_endpoint_in_the_environment_names_the_variable_not_the_value",
        ),
    ),
    Mutant(
        "more-line-total-without-separators",  # "(10 of 2956 rows; 2,946 more ...)"
        "exporter/analytics/report_text.py",
        "({top:,} of {total:,} rows;",
        "({top:,} of {total} rows;",
        (f"{HEADLINE}::test_the_more_line_carries_thousands_separators",),
    ),
    Mutant(
        "damaged-log-not-named",  # "Kernel error: Json error: ..." and no file, no fix
        "exporter/store/lake/tables.py",
        'if "Json error" in str(exc):  # delta-rs\' parse error of a log file',
        "if False:",
        (
            "tests/lake/test_sync_lake.py::"
            "test_a_damaged_commit_file_of_a_side_table_is_named_with_its_fix",
        ),
    ),
    Mutant(
        "damaged-log-file-not-found",  # only the commits before the last checkpoint read
        "exporter/store/lake/tables.py",
        "for k, n in numbered.items() if n > since)",
        "for k, n in numbered.items() if n < since)",
        (
            "tests/lake/test_sync_lake.py::"
            "test_a_damaged_commit_file_of_a_side_table_is_named_with_its_fix",
        ),
    ),
    Mutant(
        "threshold-count-without-separators",  # "threshold: 3194 operation(s) ..."
        "exporter/ops/check.py",
        'f"{int(value):,} operation(s) of',
        'f"{int(value)} operation(s) of',
        ("tests/ops/test_check.py::test_a_threshold_count_carries_thousands_separators",),
    ),
]


@functools.cache
def _repository_files() -> tuple[str, ...]:
    """The repository's files (tracked and untracked, not ignored), listed once a run."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    return tuple(rel for rel in listed if (ROOT / rel).is_file())


def _copy_repo(dest: Path) -> None:
    """The repository's files as they are now. Copies, not links: a test writing a file of
    its copy in place must never reach the working tree."""
    for rel in _repository_files():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / rel, target)


def _work_root() -> str | None:
    """Where the copies go: a RAM-backed /dev/shm when there is one (copying the ~350 files was
    0.45 s a mutant on disk under the mutants' own load, 0.05 there: ~50 s of CI's wall), else
    the default temporary directory. Each copy is removed once its mutant is judged."""
    shm = Path("/dev/shm")
    try:
        usable = shm.is_dir() and os.access(shm, os.W_OK) and shutil.disk_usage(shm).free > 1 << 30
    except OSError:
        usable = False
    return str(shm) if usable else None


# A mutant's run is mostly pytest starting (~1 s of CPU, 430 times): the project's addopts
# (`-n 4`: xdist) are replaced by the one that changes how tests import, and the plugins no
# mutant's tests use (xdist, anyio's, the cache; hypothesis's below) and assertion rewriting
# (its messages are not read here: a failure is a failure) are left out: ~0.25 s each.
_LEAN = (
    "-o",
    "addopts=--strict-markers --import-mode=importlib",
    "--assert=plain",
    *("-p", "no:xdist", "-p", "no:anyio", "-p", "no:cacheprovider"),
)


def _without_unused_plugins(root: Path, tests: tuple[str, ...]) -> list[str]:
    """Hypothesis's pytest plugin imports hypothesis whole at start-up (~0.5 s of a mutant's
    ~1.2 s collection): left out unless a test file of the mutant uses hypothesis."""
    files = {root / test.partition("::")[0] for test in tests}
    uses = any(
        "hypothesis" in path.read_text()
        for f in files
        for path in (f.rglob("test_*.py") if f.is_dir() else [f])
    )
    return [] if uses else ["-p", "no:hypothesispytest"]


# Every mutant's pytest imports these (none of them ours): a fork server imports them once and
# each mutant's pytest starts as a fork of it, with its copy first on sys.path (~0.3 s of the
# ~1 s a fresh interpreter spends starting; 441 mutants). Ours are imported afresh in each
# fork, from its copy: the server never imports `exporter`.
_PRELOAD = (
    "pytest",
    "_pytest.assertion.rewrite",
    "pyarrow",
    "pyarrow.compute",
    "pyarrow.parquet",
    "duckdb",
    "msgspec",
    "orjson",
    "httpx",
    "click",
    "hypothesis",
    "pandas",  # imported by a third of the mutants' tests (~0.33 s of CPU each)
)
_FORKS = multiprocessing.get_context("forkserver")
# One copy made or test process started at a time; held for good by `_stop_on_sigterm`.
_STARTING = threading.Lock()
_RUNNING: set[Any] = set()  # the tests under way


def _stop_on_sigterm(work: str) -> None:
    """CI's EXIT trap SIGTERMs this run when a step beside it fails (.ci/run): that ended this
    process alone; the tests it had started ran on, and its copies stayed in /dev/shm (RAM)
    for good. Once no copy or test process is being started, they are killed and removed."""

    def stop(signum: int, _frame: object) -> None:
        _STARTING.acquire()
        for proc in list(_RUNNING):
            proc.kill()
        shutil.rmtree(work, ignore_errors=True)
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)


def _pytest_in_fork(copy: str, args: list[str], out: str, env: dict[str, str]) -> None:
    """A mutant's pytest, in a fork of the server: as `python -m pytest ARGS` would run in
    `copy` (its output to `out`.stdout / `out`.stderr, its exit code the process's)."""
    for fd, name in ((1, f"{out}.stdout"), (2, f"{out}.stderr")):
        handle = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(handle, fd)
        os.close(handle)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(copy)
    sys.path.insert(0, copy)  # `python -m` puts the working directory first
    sys.dont_write_bytecode = True
    import pytest

    code = pytest.main(args)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(int(code))


def _pytest_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPSAUDIT_", "NEON_"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _pytest_args(copy: Path, tests: tuple[str, ...]) -> list[str]:
    return ["-x", "-q", *_LEAN, *_without_unused_plugins(copy, tests), *tests]


def _pytest(copy: Path, tests: tuple[str, ...], timeout: float) -> tuple[int | None, str]:
    """Run `tests` in `copy`: (pytest's exit code, None when timed out; its stdout)."""
    env, args = _pytest_env(), _pytest_args(copy, tests)
    out = str(copy / ".mutant-pytest")
    with _STARTING:
        fork = _FORKS.Process(target=_pytest_in_fork, args=(str(copy), args, out, env))
        fork.start()
        _RUNNING.add(fork)
    try:
        fork.join(timeout)
        if fork.exitcode is None:
            fork.kill()
            fork.join()
            return None, ""
    finally:
        _RUNNING.discard(fork)
    return fork.exitcode, Path(f"{out}.stdout").read_text(errors="replace")


def _pytest_fresh(copy: Path, tests: tuple[str, ...], timeout: float) -> tuple[int | None, str]:
    """`_pytest` in a fresh interpreter: `python -m pytest` in `copy`."""
    env, args = _pytest_env(), _pytest_args(copy, tests)
    with _STARTING:
        fresh = subprocess.Popen(
            [sys.executable, "-m", "pytest", *args],
            cwd=copy,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        _RUNNING.add(fresh)
    try:
        stdout, _ = fresh.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        fresh.kill()
        fresh.communicate()
        return None, ""
    finally:
        _RUNNING.discard(fresh)
    return fresh.returncode, stdout


def _run(mutant: Mutant, work: Path, timeout: float) -> tuple[str, float, str]:
    """Apply `mutant` in a fresh copy, run its tests; 'killed' when they fail."""
    # A control's name holds ':' and '/': a ':' in the copy's path split the PYTHONPATH the
    # tests hand their subprocesses (which then imported the working tree's package).
    copy = work / re.sub(r"[^\w.-]", "-", mutant.name)
    with _STARTING:
        _copy_repo(copy)
    try:
        return _judge(mutant, copy, timeout)
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def _judge(mutant: Mutant, copy: Path, timeout: float) -> tuple[str, float, str]:
    """Apply `mutant` to `copy` and run its tests there: the verdict, seconds, last line."""
    target = copy / mutant.path
    text = target.read_text()
    count = text.count(mutant.old)
    if count != 1:
        return "STALE", 0.0, f"snippet found {count} times in {mutant.path}: update the mutant"
    target.write_text(text.replace(mutant.old, mutant.new))
    started = time.monotonic()
    code, stdout = _pytest(copy, mutant.tests, timeout)
    elapsed = time.monotonic() - started
    if code is None:
        # A fork of a server with threads (pyarrow's allocator) might hang where a fresh
        # interpreter would not: a timeout is a kill only if the tests time out there too.
        code, stdout = _pytest_fresh(copy, mutant.tests, timeout)
        elapsed = time.monotonic() - started
        if code is None:
            return "killed", elapsed, "(timed out)"
    if code not in (0, 1):
        # Once in 500 mutants under load a fork's pytest ended with another code after its
        # summary line ("1 failed in 0.16s"), the same mutant killed in every run since: judged
        # by a fresh interpreter too before it is called an error.
        code, stdout = _pytest_fresh(copy, mutant.tests, timeout)
        elapsed = time.monotonic() - started
    tail = (stdout.strip().splitlines() or [""])[-1]
    if code == 0:
        return "SURVIVED", elapsed, tail
    if code not in (1,):  # 2-5: the tests did not run (import error, usage...)
        return "ERROR", elapsed, f"(exit {code}) {tail}"
    # A failed test shows as `F` (or `E`) in the progress lines and as "failed" in the summary;
    # exit 1 with neither (a warning at exit, say) is no evidence of a kill.
    progress = re.compile(r"^[.sxXFE]+(\s+\[\s*\d+%\])?$")
    failed_marks = any(
        progress.match(line) and ("F" in line or "E" in line) for line in stdout.splitlines()
    )
    if not failed_marks and not re.search(r"\d+ (failed|error)", stdout):
        return "UNCLEAR", elapsed, tail
    return "killed", elapsed, tail


def _controls(chosen: list[Mutant]) -> list[Mutant]:
    """Unmutated runs that must pass: the first chosen mutant's tests of each test folder (and
    each file at the top of tests/). A sample, not a proof: a test that failed in a fork alone
    would make its mutants look killed; the fork differs from a fresh interpreter only by the
    third-party modules already imported (`_PRELOAD`), and the controls check that much."""
    first: dict[str, Mutant] = {}
    for m in chosen:
        path = Path(m.tests[0].partition("::")[0])
        first.setdefault(str(path.parent if path.parent.name != "tests" else path), m)
    return [Mutant(f"control:{where}", m.path, m.old, m.old, m.tests) for where, m in first.items()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="mutants to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    # Four at once on 2 cores: a mutant's run is half start-up and waiting (50 mutants: 131-150 s
    # at 2, 97-99 at 3, 90-95 at 4).
    parser.add_argument("--jobs", type=int, default=4, help="mutants run at once")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per mutant")
    args = parser.parse_args(argv)
    if args.list:
        for m in MUTANTS:
            print(f"{m.name:<40} {m.path}")
        return 0
    unknown = set(args.names) - {m.name for m in MUTANTS}
    if unknown:
        parser.error(f"unknown mutant(s): {', '.join(sorted(unknown))}")
    chosen = [m for m in MUTANTS if not args.names or m.name in args.names]
    failed = broken_controls = 0
    with (
        tempfile.TemporaryDirectory(prefix="opsaudit-mutants-", dir=_work_root()) as tmp,
        ThreadPoolExecutor(max(1, args.jobs)) as pool,
    ):
        _FORKS.set_forkserver_preload(["__main__", *_PRELOAD])
        _stop_on_sigterm(tmp)
        controls = _controls(chosen)
        futures = [(m, pool.submit(_run, m, Path(tmp), args.timeout)) for m in controls + chosen]
        for m, future in futures:
            verdict, elapsed, tail = future.result()
            if m in controls:
                # The same tests, nothing changed: they pass ("SURVIVED" here), or no kill holds.
                verdict = "passed" if verdict == "SURVIVED" else "CONTROL-" + verdict
                broken_controls += verdict != "passed"
            else:
                failed += verdict != "killed"
            print(f"{verdict:<9} {m.name:<40} {elapsed:6.1f}s  {tail}", flush=True)
    print(f"{len(chosen) - failed} killed, {failed} survived or broken, of {len(chosen)}")
    if broken_controls:
        print(f"{broken_controls} control run(s) failed: no kill above can be trusted")
    return 1 if failed or broken_controls else 0


if __name__ == "__main__":
    sys.exit(main())
