"""The team-server load benchmark in its quick form, as a test of correctness (not speed): concurrent
labelers and browsers on one token-signed-in server over PostgreSQL, every confirmed label stored
exactly once under its labeler's signed-in name."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_quick_team_load_stores_every_label_exactly_once():
    import team_load_bench

    r = team_load_bench.run(quick=True)
    assert not r["errors"], r["errors"]
    assert (r["single_saves_done"], r["single_renders_done"]) == (r["single_saves"], r["single_renders"])
    assert r["load_saves"] >= 2 and r["load_renders"] >= 2  # every session under load did something
    assert r["saves"] == r["single_saves_done"] + r["load_saves"]
    assert r["labels_expected"] == 6 * r["saves"] == r["labels_stored"]
    assert (r["lost"], r["extra"], r["different"], r["duplicated_keys"], r["unconfirmed"]) == (0, 0, 0, 0, 0)
    assert r["rss_peak_mb"] >= r["rss_start_mb"] > 0
