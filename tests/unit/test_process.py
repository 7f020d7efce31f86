"""Tests of tf_contrib_easgd.trainer.process: a run's start, and a run re-executed in place.

No TensorFlow: the re-executed child is a small Python script.
"""

import os
import time

from tf_contrib_easgd.trainer import process


def test_started_at_is_in_the_past():
    # The process started before this test ran, and (pytest start-up) not hours ago.
    age = time.monotonic() - process.started_at()
    assert 0 < age < 3600


def test_started_at_of_a_restarted_run_comes_from_the_environment(monkeypatch):
    restarted_at = time.monotonic()
    monkeypatch.setenv(process.RESTARTED_AT_ENV, repr(restarted_at))
    assert process.started_at() == restarted_at
    assert process.RESTARTED_AT_ENV not in os.environ  # Read once.
    assert process.started_at() < restarted_at  # Then this pytest process's own start.


def test_a_malformed_restart_time_is_ignored(monkeypatch):
    monkeypatch.setenv(process.RESTARTED_AT_ENV, "soon")
    age = time.monotonic() - process.started_at()
    assert 0 < age < 3600
