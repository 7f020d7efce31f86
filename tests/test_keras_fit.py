"""easgd-train --api=keras: Keras model.fit jobs of real ps and worker processes.

Each job is one ps and two workers of easgd-train in task mode (`fault_jobs.Job`: 1000
local steps, tau 10, `--progress_format=json`); the workers run `model.fit` with
`ElasticAverageCallback`, with Keras 3 or, with TF_USE_LEGACY_KERAS=1 in their
environment, tf-keras. The same job with `--api=tf1` is the yardstick.
"""

import importlib.util

import pytest
from fault_jobs import MIN_ACCURACY, PERIOD, STEPS, Job

pytestmark = pytest.mark.e2e


def _run(model_dir, *flags):
    with Job(model_dir, *flags) as job:
        job.start()
        summary = job.finish()
    return job, summary


@pytest.mark.parametrize(
    "keras",
    [
        "keras",
        pytest.param(
            "tf_keras",
            marks=pytest.mark.skipif(
                importlib.util.find_spec("tf_keras") is None, reason="needs tf-keras"
            ),
        ),
    ],
)
def test_model_fit_reaches_the_centre_accuracy_of_the_tf1_job(tmp_path, monkeypatch, keras):
    _, tf1 = _run(tmp_path / "tf1")
    if keras == "tf_keras":
        monkeypatch.setenv("TF_USE_LEGACY_KERAS", "1")  # The children's tf.keras.
    job, summary = _run(tmp_path / "keras", "--api=keras")
    print(
        f"\ncentre accuracy: tf1 {tf1['test_accuracy']:.4f}, {keras} {summary['test_accuracy']:.4f}"
    )
    assert summary["api"] == "keras"
    assert summary["local_steps"] == {"0": STEPS, "1": STEPS}
    assert summary["unfinished_workers"] == []
    # tau 10: 100 exchanges per worker, all counted once the chief has waited for worker 1.
    assert summary["exchanges"] == tf1["exchanges"] == 2 * STEPS // PERIOD
    # The same MLP, optimizer (momentum 0.05), data and exchanges: the two centres land
    # within a point or two of each other (tf1 0.97; keras 0.96-0.97 here).
    assert summary["test_accuracy"] > MIN_ACCURACY
    assert summary["test_accuracy"] > tf1["test_accuracy"] - 0.03
    assert summary["export"].endswith("centre.keras")
    # Worker 1 waited for the chief's centre and started from it.
    [started] = job.of("worker 1", "started")
    assert started["centre"] == "waited"


def test_a_killed_worker_restarts_from_the_centre(tmp_path):
    with Job(tmp_path, "--api=keras") as job:
        job.start()
        job.wait_for_step("worker 1", 300)
        job.kill("worker 1")
        job.restart("worker 1")
        summary = job.finish()
    first, second = job.of("worker 1", "started")
    # The new process found the centre the chief and its own first run had moved (its 300
    # steps were 30 exchanges) and started from it.
    assert first["centre"] == second["centre"] == "waited"
    assert second["global_step"] >= 300 // PERIOD
    assert second["global_step"] > first["global_step"]
    # --api=keras keeps no work ledger: the restarted process trained its STEPS again.
    assert summary["local_steps"] == {"0": STEPS, "1": STEPS}
    assert summary["exchanges"] >= 2 * STEPS // PERIOD + 300 // PERIOD
    assert summary["test_accuracy"] > MIN_ACCURACY
