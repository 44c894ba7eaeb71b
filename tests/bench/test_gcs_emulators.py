"""The Cloud Storage checks of bench.gcs_emulators, run against the rehearsal's stand-in (no emulator installed)."""

from __future__ import annotations

import pytest

from bench import gcs_emulators


@pytest.mark.parametrize("check", gcs_emulators.CHECKS, ids=lambda check: check.__name__)
def test_the_stand_in_passes_every_check(check, tmp_path):
    with gcs_emulators.serve("stand-in", tmp_path) as (url, folder):
        check(url, folder)


def test_a_failed_check_is_reported_with_its_error_in_the_table(tmp_path):
    def lists_nothing(url, folder):
        """list: nothing there"""
        assert list(gcs_emulators.client(url).list_blobs("bkt")) == ["x"], "listing"

    checks = [gcs_emulators.compose, lists_nothing]
    results = gcs_emulators.conformance(["stand-in"], tmp_path, checks)
    assert results["stand-in"]["compose"] == "ok"
    assert results["stand-in"]["lists_nothing"].startswith("FAIL AssertionError: listing")
    table = gcs_emulators.conformance_table(results, checks).splitlines()
    assert table[0] == "| need | stand-in |"
    assert table[3].startswith("| list: nothing there | FAIL AssertionError: listing")
    assert table[4] == "| checks passed | 1/2 |"


def test_timings_table_has_an_operation_per_row_and_a_server_per_column():
    table = gcs_emulators.timings_table({"a": {"list 200": 0.01}, "b": {"list 200": 0.0125}})
    assert table.splitlines() == ["| operation | a | b |", "| --- | --- | --- |", "| list 200 | 0.010 s | 0.013 s |"]
