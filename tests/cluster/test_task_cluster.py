"""In-process cluster tests: easgd-train's tasks (trainer/task.py, worker.py, graph.py,
export.py).

The tests of its other tiers are in tests/unit/test_task.py.
"""

import dataclasses
import io
import json
import os
import threading

import numpy as np
import portpicker
import pytest
import tensorflow as tf
from trainer_configs import train_config as _config

import tf_contrib_easgd
from tf_contrib_easgd.runner.display import parse_event
from tf_contrib_easgd.trainer import cluster, models, progress, task

JOB_TIMEOUT_SECS = 120


def _hosts(count):
    return tuple(f"localhost:{portpicker.pick_unused_port()}" for _ in range(count))


@dataclasses.dataclass
class Job:
    """What the tasks of a threaded job returned, raised and reported."""

    results: dict
    errors: dict
    events: dict


def run_job(config, num_ps=1, num_workers=2, run_workers=None):
    """Runs ps and worker tasks in threads; returns a `Job` once all finish.

    Args:
        config: the TrainConfig.
        num_ps: parameter servers.
        num_workers: workers in the cluster.
        run_workers: indices of the workers to run (default: all).
    """
    ps_hosts, worker_hosts = _hosts(num_ps), _hosts(num_workers)
    tasks = [cluster.TaskConfig(ps_hosts, worker_hosts, "ps", i) for i in range(num_ps)]
    tasks += [
        cluster.TaskConfig(ps_hosts, worker_hosts, "worker", i)
        for i in (range(num_workers) if run_workers is None else run_workers)
    ]
    job = Job({}, {}, {})
    streams = {t.name: io.StringIO() for t in tasks}

    def run(one):
        reporter = progress.Reporter(one.name, progress.JSON, streams[one.name])
        try:
            job.results[one.name] = task.run(one, config, reporter)
        except Exception as error:  # noqa: BLE001 - handed to the test.
            job.errors[one.name] = error

    threads = [threading.Thread(target=run, args=(t,), daemon=True) for t in tasks]
    for thread in threads:
        thread.start()
    for thread in threads[num_ps:]:
        thread.join(JOB_TIMEOUT_SECS)
    if any(thread.is_alive() for thread in threads[:num_ps]):
        # The chief stops the servers; if it failed, do it here so no thread is left.
        tf_contrib_easgd.stop_parameter_servers(tasks[0].cluster_spec(), timeout_secs=10)
    for thread in threads:
        thread.join(10)
    assert not any(thread.is_alive() for thread in threads), "a task did not finish"
    for name, stream in streams.items():
        lines = stream.getvalue().splitlines()
        job.events[name] = [parse_event(line) for line in lines]
    return job


def _kinds(events):
    return [event["event"] for event in events]


def _scalars(directory):
    """Returns {tag: [(step, value), ...]} of the TensorBoard events in `directory`."""
    scalars = {}
    for name in os.listdir(directory):
        for event in tf.compat.v1.train.summary_iterator(os.path.join(directory, name)):
            for value in event.summary.value:
                scalars.setdefault(value.tag, []).append((event.step, value.simple_value))
    return scalars


@pytest.mark.parametrize(
    ("synchronous", "overlap"),
    [(False, False), (True, False), (False, True)],
    ids=["asynchronous", "synchronous", "overlap"],
)
def test_a_job_trains_exports_and_evaluates_the_centre(tmp_path, synchronous, overlap):
    # With overlap too, every exchange is complete when a worker ends (the hook's end()).
    config = _config(tmp_path, synchronous=synchronous, overlap=overlap)
    job = run_job(config)
    assert job.errors == {}
    summary = job.results["worker 0"]
    assert job.results["worker 1"] is None and job.results["ps 0"] is None

    # Each worker took 60 local steps; with tau = 5 each made 12 exchanges, and
    # global_step counts exchanges of both: 24.
    assert summary["local_steps"] == {"0": 60, "1": 60}
    assert summary["exchanges"] == 24
    # Default moving rate: 0.9 / tau / workers = 0.9 / 5 / 2.
    assert summary["moving_rate"] == pytest.approx(0.09)
    assert summary["test_examples"] == 355
    # 60 steps of batch 32 per worker see ~2.7 epochs of the 1442 training digits; a
    # one-hidden-layer MLP is past 0.85 there (seeds 0-2 here: 0.93-0.95); chance is 0.1.
    assert summary["test_accuracy"] > 0.85
    with open(tmp_path / "summary.json", encoding="utf-8") as file:
        assert json.load(file) == summary

    # The checkpoint of the centre and global_step, as a TF1 chief writes it.
    checkpoint = tf.train.latest_checkpoint(str(tmp_path))
    assert checkpoint == summary["checkpoint"] == str(tmp_path / "model.ckpt-24")
    reader = tf.train.load_checkpoint(checkpoint)
    assert reader.get_tensor("global_step") == 24
    assert "global_center_variable/mlp/hidden_0/kernel" in reader.get_variable_to_shape_map()
    # The export holds the centre under the plain names, and equals the checkpointed one.
    export = tf.train.load_checkpoint(summary["export"])
    np.testing.assert_array_equal(
        export.get_tensor("mlp/logits/kernel"),
        reader.get_tensor("global_center_variable/mlp/logits/kernel"),
    )
    accuracy = models.evaluate_checkpoint(summary["export"], "mlp", *_test_split(), num_classes=10)[
        "accuracy"
    ]
    assert accuracy == summary["test_accuracy"]

    # Progress: every worker reported steps 20, 40, 60 with a finite elastic distance.
    for name in ("worker 0", "worker 1"):
        reports = [e for e in job.events[name] if e["event"] == "progress"]
        assert [e["step"] for e in reports] == [20, 40, 60]
        assert all(np.isfinite(e["distance"]) and e["distance"] >= 0 for e in reports)
    # Worker 1 then waited for the chief to end the job (it ends with no event).
    assert _kinds(job.events["worker 1"])[-2:] == ["done", "waiting"]
    assert job.events["worker 1"][-1]["what"] == "the chief to end the job"
    assert _kinds(job.events["worker 0"])[-1] == "summary"
    assert [e["step"] for e in job.events["worker 0"] if e["event"] == "centre"] == [30, 60]
    assert _kinds(job.events["ps 0"]) == ["serving", "stopped"]

    # TensorBoard: per-worker loss and elastic distance, the chief's centre curve.
    chief = _scalars(tmp_path / "worker_0")
    assert [step for step, _ in chief["loss"]] == [20, 40, 60]
    assert [step for step, _ in chief["centre/test_accuracy"]] == [30, 60]
    # (The last curve point may precede worker 1's last exchanges, so it is not compared
    # with the final accuracy.)
    assert all(0 <= value <= 1 for _, value in chief["centre/test_accuracy"])
    assert "elastic_distance" in _scalars(tmp_path / "worker_1")


def _test_split():
    from tf_contrib_easgd.trainer import data  # noqa: PLC0415

    digits = data.load_digits()
    return digits.x_test, digits.y_test


def test_a_job_trains_the_cnn_on_an_npz_dataset(tmp_path):
    # Three classes of 12x12 uint8 images: a bright band in the top, middle or bottom
    # third, on noise. Any working convolutional classifier separates them at once.
    rng = np.random.default_rng(0)

    def images(labels):
        x = rng.integers(0, 60, (len(labels), 12, 12), dtype=np.uint8)
        for i, label in enumerate(labels):
            x[i, 4 * label : 4 * label + 4] += 180
        return x

    y_train, y_test = rng.integers(0, 3, 300), rng.integers(0, 3, 60)
    path = tmp_path / "bands.npz"
    np.savez(path, x_train=images(y_train), y_train=y_train, x_test=images(y_test), y_test=y_test)
    config = _config(tmp_path / "run", dataset=str(path), model="cnn", steps=40)
    job = run_job(config)
    assert job.errors == {}
    summary = job.results["worker 0"]
    assert (summary["dataset"], summary["model"], summary["test_examples"]) == (
        "bands.npz",
        "cnn",
        60,
    )
    assert summary["test_accuracy"] > 0.9  # Chance is 1/3; runs here reach 1.0.


def test_the_chief_exports_anyway_when_a_worker_never_finishes(tmp_path):
    # Worker 1 of 2 never runs: the chief waits `timeout_secs` for it, warns, exports.
    # (`timeout_secs` is also every op's deadline: 3 s leaves room on a loaded machine.)
    job = run_job(_config(tmp_path, steps=20, timeout_secs=3.0), run_workers=[0])
    assert job.errors == {}
    summary = job.results["worker 0"]
    assert summary["local_steps"] == {"0": 20, "1": 0}  # The ledger's counts.
    assert summary["unfinished_workers"] == [1]
    assert summary["exchanges"] == 4  # 20 / tau, from worker 0 only.
    warnings = [e["message"] for e in job.events["worker 0"] if e["event"] == "warning"]
    assert warnings == ["workers [1] did not finish within 3 s; exporting the centre as it is"]


def test_a_worker_without_chief_fails_after_the_timeout(tmp_path):
    job = run_job(_config(tmp_path, timeout_secs=1.0), run_workers=[1])
    error = job.errors["worker 1"]
    assert isinstance(error, TimeoutError)
    assert "The chief did not initialise the centre within 1 s" in str(error)


def test_a_worker_fails_when_the_parameter_server_is_unreachable(tmp_path):
    one = cluster.TaskConfig(_hosts(1), _hosts(1), "worker", 0)
    reporter = progress.Reporter(one.name, progress.JSON, io.StringIO())
    with pytest.raises(TimeoutError, match=rf"\['{one.ps_hosts[0]}'\] still not reachable"):
        task.run(one, _config(tmp_path, timeout_secs=0.5), reporter)
