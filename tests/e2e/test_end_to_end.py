"""End to end: 1 ps + 2 workers as separate OS processes, then the centre in a plain model.

The test starts the three tasks of easgd-train in task mode by flags, as a user would on
three machines: `--job_name --task_index --ps_hosts --worker_hosts`. They train a small
classifier on the embedded digits under MonitoredTrainingSession with a checkpoint
directory. Then this test itself restores the exported centre into a plain
single-process model (no EASGD, no cluster) and measures its accuracy on the held-out
test split.
"""

import os

import numpy as np
import pytest
import tensorflow as tf
from processes import child_env, easgd_train_tasks

from tf_contrib_easgd.runner import launcher
from tf_contrib_easgd.runner.display import parse_event
from tf_contrib_easgd.trainer import data, models

STEPS = 200
TIMEOUT_SECS = 240  # Three TensorFlow imports on 2 cores take ~30 s; training ~5 s.


def test_three_processes_train_and_a_plain_model_restores_the_centre(tmp_path):
    tasks = easgd_train_tasks(
        (
            f"--steps={STEPS}",
            "--log_every_steps=100",
            "--communication_period=10",
            f"--model_dir={tmp_path}",
            "--timeout_secs=120",
        ),  # fmt: skip
        tasks=(("ps", 0), ("worker", 1), ("worker", 0)),
    )
    events = []
    with launcher.LocalCluster(
        tasks,
        env=child_env(),
        log_dir=str(tmp_path / "logs"),
        on_line=lambda task, line: events.append(parse_event(line)),
        stall_timeout_secs=TIMEOUT_SECS,
    ) as job:
        # Worker 1 starts first and waits for the chief: the chief's initialisation of
        # the centre comes after worker 1's first readiness check.
        job.start(only=["ps 0", "worker 1"])
        waiting = '"what": "the chief to initialise the centre"'
        assert job.wait_for_line(lambda task, line: waiting in line, TIMEOUT_SECS)
        job.start(only=["worker 0"])
        job.supervise()
        assert job.wait_for_servers(30)  # The chief stops the ps at the end.

    events = [event for event in events if event]
    started = {e["task"]: e["time"] for e in events if e["event"] == "started"}
    # Task mode's defaults, for a network: the paper's moving rate 0.9 / 2 = 0.45, so the
    # exchanges overlap (a queue runner's plain ops: no call, transport "none"), over a
    # bfloat16 wire. (Local mode's, direct calls at full width, are test_train.py's.)
    assert {e["transport"] for e in events if e["event"] == "started"} == {"none"}
    # MonitoredTrainingSession alone sleeps 30 s after a failed readiness check; worker 1
    # polls first, so its session is ready within seconds of the chief's.
    assert started["worker 1"] - started["worker 0"] < 10
    summary = next(e for e in events if e["event"] == "summary")
    # 200 local steps each, tau = 10: 20 exchanges per worker, 40 in global_step.
    assert summary["local_steps"] == {"0": STEPS, "1": STEPS}
    assert summary["exchanges"] == 40
    assert (summary["moving_rate"], summary["overlap"], summary["wire_dtype"]) == (
        0.45,
        True,
        "bfloat16",
    )

    # The checkpoint directory has the centre under the EASGD names, as TF1 wrote it.
    checkpoint = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(tmp_path)))
    assert checkpoint.get_tensor("global_step") == 40
    names = checkpoint.get_variable_to_shape_map()
    assert "global_center_variable/mlp/hidden_0/kernel" in names
    assert "mlp/hidden_0/kernel" not in names  # Worker copies are local, not checkpointed.

    # A plain model: same code, no custom getter, no devices, one process, default Saver.
    digits = data.load_digits()
    export = os.path.join(str(tmp_path), "export", "centre")
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [None, 8, 8, 1])
        predictions = tf.argmax(models.build_model("mlp", images, 10), axis=1)
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session() as session:
            saver.restore(session, export)
            predicted = session.run(predictions, {images: digits.x_test})
            kernel = session.run(tf.compat.v1.global_variables()[0])
    # The restored values are the centre of the final checkpoint, exactly.
    np.testing.assert_array_equal(
        kernel, checkpoint.get_tensor("global_center_variable/mlp/hidden_0/kernel")
    )
    accuracy = float(np.mean(predicted == digits.y_test))
    assert accuracy == pytest.approx(summary["test_accuracy"])
    # 200 steps of batch 32 per worker are ~4.4 epochs of the 1442 training digits; the
    # MLP's centre reaches 0.95-0.96 on the 355 held-out digits here (seeds 0-2). 0.9
    # leaves room for the asynchrony of the run (chance is 0.1).
    assert accuracy > 0.9
