"""examples/legacy_tf1's other TF1 scripts migrate with the two tools alone and train.

Each script is kept in its unconverted 2018 form. A test copies it (with the files it
imports), converts it with `tf_upgrade_v2` (its console script's converter, in the test's
process, which has TensorFlow loaded already) and then the `easgd-migrate` console script as
a user does, checks the tool's report and that a second run changes nothing, and then runs
the result as a real job: one parameter server and two workers, separate OS processes on
free loopback ports, to a test accuracy. What each script covers is in its docstring; in short:

* cnn_trainer.py: `tf.layers` CNN (Keras 2 through tf-keras on TF >= 2.16), `tf.losses`,
  `tf.data` with a one-shot iterator, a `tf.Variable` global step, `StopAtStepHook`,
  `tf.summary.scalar` written by `MonitoredTrainingSession`, Momentum with `rho=0.0`.
* session_loop.py: a plain `tf.Session` loop, EASGD imported from a vendored copy of
  contrib's module, a `tf.Variable` global step, `tf.summary.merge_all` and a `FileWriter`,
  the swapping saver called by hand.
* module_level.py: a tutorial with no main and no main guard (easgd-migrate must see a
  script in it), a queue input pipeline, `MonitoredTrainingSession` (which easgd-migrate
  makes this package's) with a checkpoint directory.
* supervisor_replica.py: a `tf.train.Supervisor` session (noted by easgd-migrate), the
  optimizer's init op run by hand, a `tf.Variable` global step, batches fed from numpy.
* estimator_trainer.py (TensorFlow 2.15 only: tf.estimator): a Kubeflow-style TF_CONFIG
  job, `tf.estimator.inputs.numpy_input_fn`, EASGD in the `model_fn`,
  `train_and_evaluate`, `export_savedmodel` on the chief.

* slim_project/ (a tree of five modules, converted by one command each: `tf_upgrade_v2
  --intree` and `easgd-migrate DIR`): `from common import *` bringing `tf` and `slim`,
  `tf.contrib.slim` as tf-slim, an input helper with a queue pipeline, image summaries,
  `resize_images(method=0)` and `draw_bounding_boxes`, a slim network whose L2 regularizer
  becomes `tf.keras` (Keras 2 through tf-keras), `slim.learning.train` (a Supervisor) and a
  stop and a decay on `global_step`, which counts exchanges.

The ps is never told to stop (the scripts only `join()` it, as 2018 scripts did); the test
kills it once the workers are done.
"""

import ast
import dataclasses
import pathlib
import re
import shutil
import time

import legacy_jobs
import numpy as np
import pytest
import tensorflow as tf
from estimator_support import requires_estimator
from sklearn.datasets import load_digits

NUM_TRAIN = 1500  # Both scripts train on the first 1500 digits and test on the other 297.
CHIEF_READY_TIMEOUT_S = 150
TRAINING_TIMEOUT_S = 300


@dataclasses.dataclass(frozen=True)
class Script:
    """One corpus script and how the test runs it.

    Attributes:
        name: the script's file name in examples/legacy_tf1.
        imports: further files of that folder it imports (copied and migrated with it).
        flags: flags of every task, `{tmp}` standing for the test's folder.
        notes: phrases easgd-migrate's report must contain (its notes on the scripts).
        target: the test accuracy each worker must reach.
    """

    name: str
    imports: tuple
    flags: tuple
    notes: tuple
    target: float


SCRIPTS = {
    # 150 exchanges at period 8 are 1200 local steps shared by both workers (both add to
    # the global step); the chief, started first, takes more of them. The unconverted script
    # under real contrib (TF 1.15, same flags, twice) ended at 0.926-0.939 for the chief
    # (834-958 steps) and 0.933-0.946 for worker 1 (357-418 steps); chance is 0.10.
    "cnn_trainer": Script(
        name="cnn_trainer.py",
        imports=(),
        flags=("--max_exchanges=150", "--train_dir={tmp}/train"),
        notes=("TF_USE_LEGACY_KERAS",),
        target=0.85,
    ),
    # 800 local steps of SGD at lr 0.5 each. The unconverted script under real contrib
    # (TF 1.15, same flags, twice) ended at 0.875-0.882 (chief) and 0.892-0.899 (worker 1).
    "session_loop": Script(
        name="session_loop.py",
        imports=("easgd_local.py",),
        flags=("--train_steps=800", "--summaries_dir={tmp}/logs"),
        notes=("easgd_local",),
        target=0.80,
    ),
    # 600 local steps of SGD at lr 0.5, period 8, each. The unconverted script under real
    # contrib (TF 1.15, same flags, twice) ended at 0.872-0.882 (chief) and 0.879-0.892
    # (worker 1); migrated, on TF 2.21, at 0.892 and 0.899.
    "module_level": Script(
        name="module_level.py",
        imports=(),
        flags=("--train_steps=600", "--checkpoint_dir={tmp}/train"),
        notes=("`tf.compat.v1.train.MonitoredTrainingSession` became tf_contrib_easgd.",),
        target=0.80,
    ),
    # The same model and steps with ReLU and a truncated normal start: under real contrib
    # (TF 1.15, same flags, twice) 0.872-0.875 (chief) and 0.875-0.886 (worker 1);
    # migrated, on TF 2.21, 0.875 and 0.879.
    "supervisor_replica": Script(
        name="supervisor_replica.py",
        imports=(),
        flags=("--train_steps=600", "--train_dir={tmp}/train"),
        notes=("`tf.compat.v1.train.Supervisor`: a chief's Supervisor restores",),
        target=0.80,
    ),
}
# 1500 exchanges (tau 4) shared by the chief and the worker, which joins late (it starts
# once the chief has written its first checkpoint, then waits 5 s as every Estimator worker
# does) and adds a few hundred. The chief's evaluation of the last checkpoint: 0.923 twice
# under real contrib (TF 1.15, same flags; the worker joined at global step 305 and 274),
# 0.923 and 0.926 migrated on TF 2.15.
ESTIMATOR = Script(
    name="estimator_trainer.py",
    imports=(),
    flags=("--model_dir={tmp}/model", "--max_exchanges=1500"),
    notes=("TF_USE_LEGACY_KERAS",),
    target=0.85,
)


def _convert(script, folder):
    """Copies `script` and its imports into `folder` and converts them with the two tools.

    Returns:
        easgd-migrate's report (stderr) of the first run.
    """
    files = [folder / name for name in (script.name, *script.imports)]
    for path in files:
        shutil.copy(legacy_jobs.LEGACY_DIR / path.name, path)
        legacy_jobs.upgrade_v2(path)
    report = legacy_jobs.migrate([p.name for p in files], folder)
    converted = {path: path.read_text() for path in files}
    again = legacy_jobs.migrate([p.name for p in files], folder)
    assert f"{len(files)} file(s) checked, 0 changed" in again, again
    assert {path: path.read_text() for path in files} == converted
    for path in files:
        code = ast.parse(converted[path], str(path))
        used = {ast.unparse(node) for node in ast.walk(code) if isinstance(node, ast.Attribute)}
        assert not [name for name in used if name.startswith("tf.contrib")], path
    return report


def _accuracies(script_name, logs):
    """The test accuracies the workers printed, checked for one line each."""
    found = {}
    for index, log in enumerate(logs):
        match = re.search(rf"^Worker {index}: test accuracy ([0-9.]+) after (\d+) steps", log, re.M)
        assert match, f"{script_name} worker {index}:\n{log[-3000:]}"
        found[f"worker{index}"] = float(match.group(1))
    return found


def _mlp_centre_accuracy(checkpoint_dir):
    """Test accuracy of session_loop.py's centre, saved under plain names by the chief."""
    reader = tf.train.load_checkpoint(str(checkpoint_dir))
    digits = load_digits()
    images = (digits.data / 16.0).astype(np.float32)[NUM_TRAIN:]
    hidden = np.tanh(images @ reader.get_tensor("model/w1") + reader.get_tensor("model/b1"))
    logits = hidden @ reader.get_tensor("model/w2") + reader.get_tensor("model/b2")
    return float(np.mean(logits.argmax(axis=1) == digits.target[NUM_TRAIN:]))


@pytest.mark.timeout(CHIEF_READY_TIMEOUT_S + TRAINING_TIMEOUT_S + 6 * legacy_jobs.TOOL_TIMEOUT_S)
@pytest.mark.parametrize("key", sorted(SCRIPTS))
def test_migrated_script_trains_on_a_ps_and_two_workers(key, tmp_path, legacy_processes):
    script = SCRIPTS[key]
    start = time.monotonic()
    report = _convert(script, tmp_path)
    for note in script.notes:
        assert note in report, report
    print(f"converted after {time.monotonic() - start:.0f} s:\n{report}")

    flags = [flag.format(tmp=tmp_path) for flag in script.flags]
    logs = legacy_processes.run_ps_and_two_workers(
        script.name, flags, CHIEF_READY_TIMEOUT_S, TRAINING_TIMEOUT_S
    )
    print(f"workers done after {time.monotonic() - start:.0f} s")
    for log in logs:
        assert "Traceback" not in log, log[-3000:]

    accuracies = _accuracies(script.name, logs)
    if key == "cnn_trainer":
        # The chief's last checkpoint is written when StopAtStepHook ends its session, at a
        # global step (exchanges of both workers) of at least --max_exchanges.
        reader = tf.train.load_checkpoint(str(tmp_path / "train"))
        assert reader.get_tensor("global_step") >= 150
        assert reader.has_tensor("conv1/kernel") and reader.has_tensor("logits/bias")
        assert list((tmp_path / "train").glob("events.out.tfevents.*")), "no summaries"
    elif key == "session_loop":
        accuracies["centre"] = _mlp_centre_accuracy(tmp_path / "logs")
        for index in (0, 1):
            assert list((tmp_path / "logs" / f"worker{index}").glob("events.out.tfevents.*"))
    else:
        # Every local step ran (fed by the queue runners in module_level.py), and the chief
        # wrote checkpoints: this package's session on closing, the Supervisor on starting.
        assert all("after 600 steps" in log for log in logs)
        assert tf.train.latest_checkpoint(str(tmp_path / "train"))
    print(f"accuracies {accuracies}")
    assert min(accuracies.values()) >= script.target, accuracies


@requires_estimator
@pytest.mark.timeout(CHIEF_READY_TIMEOUT_S + TRAINING_TIMEOUT_S + 4 * legacy_jobs.TOOL_TIMEOUT_S)
def test_migrated_estimator_script_trains_on_a_tf_config_cluster(tmp_path, legacy_processes):
    start = time.monotonic()
    report = _convert(ESTIMATOR, tmp_path)
    for note in ESTIMATOR.notes:
        assert note in report, report
    converted = (tmp_path / ESTIMATOR.name).read_text()
    # The names TF 2.16+'s converter leaves, whichever converter ran: converted by ours.
    assert converted.count("tf.compat.v1.estimator.inputs.numpy_input_fn(") == 2
    assert "estimator.export_saved_model(" in converted
    print(f"converted after {time.monotonic() - start:.0f} s:\n{report}")

    flags = [flag.format(tmp=tmp_path) for flag in ESTIMATOR.flags]
    logs = legacy_processes.run_tf_config_job(
        ESTIMATOR.name, flags, CHIEF_READY_TIMEOUT_S, TRAINING_TIMEOUT_S
    )
    print(f"chief and worker done after {time.monotonic() - start:.0f} s")
    for log in logs.values():
        assert "Traceback" not in log, log[-3000:]
    # The worker trained (its Estimator logs the loss of its first step and every 100th).
    assert "loss = " in logs["worker"], logs["worker"][-3000:]
    found = re.search(r"^Chief: test accuracy ([0-9.]+) at global step (\d+)", logs["chief"], re.M)
    assert found, logs["chief"][-3000:]
    accuracy, step = float(found.group(1)), int(found.group(2))
    print(f"chief: test accuracy {accuracy} at global step {step}")
    assert step >= 1500
    assert accuracy >= ESTIMATOR.target
    assert list((tmp_path / "model" / "export").glob("*/saved_model.pb")), "no SavedModel"


# The slim project stops at global step 100 at period 8: its two workers take at least
# 8 * 100 = 800 local steps together (the global step is the sum over the workers of their
# local steps // 8, so 100 exchanges need 800 of them), however they share them. Migrated,
# on TF 2.21 (chief started first, worker 1 once the chief's first step is taken), the
# chief's evaluation of the saved centre was 0.848 once (632 and 170 local steps); chance
# is 0.10.
PROJECT_EXCHANGES = 100
PROJECT_PERIOD = 8  # The project's default --communication_period.
PROJECT_TARGET = 0.70


@pytest.mark.timeout(CHIEF_READY_TIMEOUT_S + TRAINING_TIMEOUT_S + 4 * legacy_jobs.TOOL_TIMEOUT_S)
def test_a_slim_project_tree_migrates_in_one_command_each_and_trains(tmp_path, legacy_processes):
    pytest.importorskip("tf_slim", reason="tf-slim comes with the legacy-keras extra")
    start = time.monotonic()
    shutil.copytree(legacy_jobs.LEGACY_DIR / "slim_project", tmp_path / "original")
    legacy_jobs.upgrade_v2_tree(tmp_path / "original", tmp_path / "tf2")
    report = legacy_jobs.migrate(["tf2"], tmp_path)
    print(f"converted after {time.monotonic() - start:.0f} s:\n{report}")
    assert report.rstrip().endswith(
        "5 file(s) checked, 4 changed, 0 use(s) not converted, 0 file(s) not migrated at all."
    )
    for note in (
        # train.py: the trainer, its global_step reads, the Keras 2 its network needs.
        "train.py:108: note: `slim.learning.train` trains under a tf.train.Supervisor",
        "train.py:84: note: reads global_step for a learning-rate decay and a stop condition",
        f"train.py:28: note: imports {pathlib.Path('tf2/nets/digits_net.py')} (tf.keras)",
        "digits_net.py:13: note: tf.contrib.slim became the tf-slim package",
        "digits_input.py:1: note: builds TF1 graphs only inside functions, for tf2/train.py",
    ):
        assert note in report, report
    again = legacy_jobs.migrate(["tf2"], tmp_path)
    assert "5 file(s) checked, 0 changed" in again, again
    tree = {path: path.read_text() for path in (tmp_path / "tf2").rglob("*.py")}
    for path, code in tree.items():
        used = {ast.unparse(n) for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Attribute)}
        assert not [name for name in used if name.startswith("tf.contrib")], path
    helper = tree[tmp_path / "tf2" / "digits_input.py"]
    assert "tf.compat.v1.image.resize(images, [size, size], method=0)" in helper
    assert "tf.compat.v1.image.draw_bounding_boxes(image_batch, box)" in helper
    assert helper.count("tf.compat.v1.summary.image(") == 2

    flags = [f"--train_dir={tmp_path / 'train'}", f"--max_number_of_steps={PROJECT_EXCHANGES}"]
    logs = legacy_processes.run_ps_and_two_workers(
        "tf2/train.py", flags, CHIEF_READY_TIMEOUT_S, TRAINING_TIMEOUT_S
    )
    print(f"workers done after {time.monotonic() - start:.0f} s")
    local_steps = []
    for index, log in enumerate(logs):
        assert "Traceback" not in log, log[-3000:]
        found = re.search(rf"^Worker {index}: (\d+) local steps", log, re.M)
        assert found, log[-3000:]
        local_steps.append(int(found.group(1)))
    found = re.search(r"^Worker 0: test accuracy ([0-9.]+) of the centre", logs[0], re.M)
    assert found, logs[0][-3000:]
    accuracy = float(found.group(1))
    print(f"local steps {local_steps}, centre accuracy {accuracy}")
    assert sum(local_steps) >= PROJECT_PERIOD * PROJECT_EXCHANGES
    # The chief's swapping saver wrote the centre under the network's own names.
    reader = tf.train.load_checkpoint(str(tmp_path / "train"))
    assert reader.get_tensor("global_step") >= PROJECT_EXCHANGES
    assert reader.has_tensor("digits_net/conv1/weights")
    assert not [n for n in reader.get_variable_to_shape_map() if "center_variable" in n]
    tags = set()
    for events in (tmp_path / "train").glob("events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(str(events)):
            tags |= {value.tag for value in event.summary.value}
    # The helper's image summaries reach merge_all, which the chief's Supervisor runs.
    assert {"input_images/image/0", "boxed_images/image/0"} <= tags, tags
    assert accuracy >= PROJECT_TARGET
