"""tf_contrib_easgd.estimator: EASGD in a tf.estimator model_fn, and the Estimator's steps.

tf.estimator exists up to TensorFlow 2.15 (with tensorflow-estimator); `make test-tf215` runs
these tests there. On later TensorFlow only the ImportError test runs.

The single-process tests train an MLP on scikit-learn's 8x8 digits (1442 training, 355 test
images, `tf_contrib_easgd.trainer.data`). Plain SGD at learning rate 0.2, batch 32, one worker and
tau = 4 reached 0.93 test accuracy after 400 local steps here; chance is 0.10, so the 0.85
target tells a trained centre from a broken one with room to spare.
"""

import importlib
import json
import pathlib
import re

import numpy as np
import pytest
import tensorflow as tf
from estimator_support import (
    HAS_ESTIMATOR,
    TARGET_ACCURACY,
    TAU,
    WARNING_FILTERS,
    requires_estimator,
)

from tf_contrib_easgd import GLOBAL_VARIABLE_NAME
from tf_contrib_easgd.trainer import data

if HAS_ESTIMATOR:
    from tf_contrib_easgd.estimator import (
        ElasticAverageEstimatorHelper,
        StopAtLocalStepHook,
        count_workers,
        exchanges_for,
        session_config,
    )


pytestmark = WARNING_FILTERS  # The models' warnings (estimator_support).


# The values of tf.estimator.ModeKeys, spelled out so that parameters exist without it.
TRAIN, EVAL, PREDICT = "train", "eval", "infer"


ROOT = pathlib.Path(__file__).resolve().parents[2]


DOC = ROOT / "docs" / "ESTIMATOR.md"


LOCAL_STEPS = 400


LEARNING_RATE = 0.2


BATCH_SIZE = 32


MODEL_NAMES = {"hidden/kernel", "hidden/bias", "logits/kernel", "logits/bias"}


@pytest.fixture(scope="module")
def digits():
    return data.load_digits()


def _input_fn(images, labels, train):
    def make_dataset():
        features = {"pixels": images.reshape(len(images), -1)}
        dataset = tf.data.Dataset.from_tensor_slices(
            features if labels is None else (features, labels)
        )
        if train:
            return dataset.shuffle(len(images), seed=1).repeat().batch(BATCH_SIZE)
        return dataset.batch(len(images))

    return make_dataset


def _mlp(features):
    hidden = tf.compat.v1.layers.dense(features["pixels"], 64, tf.nn.relu, name="hidden")
    return tf.compat.v1.layers.dense(hidden, 10, name="logits")


def _eval_metrics(labels, logits):
    return {"accuracy": tf.compat.v1.metrics.accuracy(labels, tf.argmax(logits, 1))}


def helper_model_fn(features, labels, mode, config):
    """The model_fn of docs/ESTIMATOR.md, with the helper."""
    easgd = ElasticAverageEstimatorHelper(mode, config, communication_period=TAU)
    with easgd.variable_scope():
        logits = _mlp(features)
    predictions = {"class": tf.argmax(logits, 1)}
    if mode == PREDICT:
        return easgd.estimator_spec(predictions=predictions)
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = None
    if mode == TRAIN:
        opt = easgd.optimizer(tf.compat.v1.train.GradientDescentOptimizer(LEARNING_RATE))
        train_op = opt.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
    return easgd.estimator_spec(
        loss=loss, train_op=train_op, eval_metric_ops=_eval_metrics(labels, logits)
    )


def _documented_code(heading):
    """The first python block after `heading` in docs/ESTIMATOR.md."""
    text = DOC.read_text()
    section = text[text.index(heading) :]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL)[1]


def _documented_model_fn(heading):
    namespace = {"tf": tf}
    exec(_documented_code(heading), namespace)  # noqa: S102  Our own documentation.
    return namespace["model_fn"]


class _ReadAtEnd(tf.compat.v1.train.SessionRunHook):
    """Reads the worker copies and the global centres when training ends."""

    def begin(self):
        self._workers = {v.op.name: v for v in tf.compat.v1.trainable_variables()}
        prefix = GLOBAL_VARIABLE_NAME + "/"
        self._centres = {
            v.op.name[len(prefix) :]: v
            for v in tf.compat.v1.global_variables()
            if v.op.name.startswith(prefix)
        }

    def end(self, session):
        self.workers, self.centres = session.run([self._workers, self._centres])


def _estimator(model_fn, model_dir):
    config = tf.estimator.RunConfig(
        model_dir=str(model_dir), log_step_count_steps=None, save_summary_steps=None
    )
    return tf.estimator.Estimator(model_fn, config=config)


def _checkpoint(model_dir):
    reader = tf.train.load_checkpoint(str(model_dir))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def _numpy_accuracy(arrays, images, labels):
    pixels = images.reshape(len(images), -1)
    hidden = np.maximum(pixels @ arrays["hidden/kernel"] + arrays["hidden/bias"], 0)
    logits = hidden @ arrays["logits/kernel"] + arrays["logits/bias"]
    return float(np.mean(logits.argmax(axis=1) == labels))


@pytest.mark.skipif(HAS_ESTIMATOR, reason="tf.estimator exists here, the import succeeds.")
def test_import_fails_clearly_without_tf_estimator():
    with pytest.raises(ImportError) as raised:
        importlib.import_module("tf_contrib_easgd.estimator")
    message = str(raised.value)
    assert f"TensorFlow {tf.__version__} does not have" in message
    assert "tensorflow==2.15.1" in message
    assert "tensorflow-estimator==2.15.0" in message
    assert "MonitoredTrainingSession" in message


@requires_estimator
@pytest.mark.parametrize(
    ("local_steps", "num_workers", "period", "expected"),
    [
        (400, 1, 4, 100),
        (400, 2, 4, 200),  # Every worker adds its own exchanges to global_step.
        (10, 3, 4, 6),  # 2 exchanges each; the 2 steps after the last one add nothing.
        (3, 2, 4, 0),
        (7, 2, 1, 14),  # Period 1: one exchange per local step.
    ],
)
def test_exchanges_for(local_steps, num_workers, period, expected):
    assert exchanges_for(local_steps, num_workers, period) == expected


@requires_estimator
@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ((-1, 1, 4), ValueError, r"local_steps must be >= 0, got -1"),
        ((10, 0, 4), ValueError, r"num_workers must be >= 1, got 0"),
        ((10, 1, 0), ValueError, r"communication_period must be >= 1, got 0"),
        ((10.0, 1, 4), TypeError, r"local_steps must be an int, got 10.0"),
    ],
)
def test_exchanges_for_rejects_bad_arguments(args, error, match):
    with pytest.raises(error, match=match):
        exchanges_for(*args)


@requires_estimator
@pytest.mark.parametrize(
    ("tf_config", "expected"),
    [
        ("", 1),  # Local training.
        ('{"cluster": {"chief": ["h:1"], "worker": ["h:2", "h:3"], "ps": ["h:4"]}}', 3),
        ('{"cluster": {"master": ["h:1"], "worker": ["h:2"], "ps": ["h:4"]}}', 2),
        # The evaluator's TF_CONFIG: the cluster of the trainers, its own task.
        ('{"cluster": {"chief": ["h:1"], "ps": ["h:4"]}, "task": {"type": "evaluator"}}', 1),
        ('{"task": {"type": "worker", "index": 0}}', 1),
    ],
)
def test_count_workers(monkeypatch, tf_config, expected):
    assert count_workers(tf_config) == expected
    monkeypatch.setenv("TF_CONFIG", tf_config)
    assert count_workers() == expected


_CLUSTER = '"cluster": {"chief": ["h:1"], "worker": ["h:2", "h:3"], "ps": ["h:4"]}'


@requires_estimator
@pytest.mark.parametrize(
    ("tf_config", "own_device"),
    [
        (f'{{{_CLUSTER}, "task": {{"type": "chief", "index": 0}}}}', "/job:chief"),
        (f'{{{_CLUSTER}, "task": {{"type": "worker", "index": 1}}}}', "/job:worker/task:1"),
        (f'{{{_CLUSTER}, "task": {{"type": "ps", "index": 0}}}}', None),
        (f'{{{_CLUSTER}, "task": {{"type": "evaluator", "index": 0}}}}', None),
        ("", None),  # Local training.
    ],
)
def test_session_config_is_the_run_configs_default_plus_shared_devices(
    monkeypatch, tf_config, own_device
):
    config = session_config(tf_config)
    if own_device is None:
        assert config is None  # The Estimator's own default applies.
        return
    assert list(config.device_filters) == ["/job:ps", own_device]
    assert config.share_cluster_devices_in_session
    # Everything else as RunConfig's default for the task.
    monkeypatch.setenv("TF_CONFIG", tf_config)
    default = tf.estimator.RunConfig().session_config
    config.share_cluster_devices_in_session = False
    assert config == default


@requires_estimator
@pytest.mark.parametrize("tf_config", ["{cluster", "[1, 2]"])
def test_count_workers_rejects_bad_tf_config(tf_config):
    with pytest.raises(ValueError, match=r"TF_CONFIG"):
        count_workers(tf_config)
    with pytest.raises(ValueError, match=r"TF_CONFIG"):
        session_config(tf_config)


@requires_estimator
@pytest.mark.parametrize("function", ["count_workers", "session_config"])
def test_tf_config_must_be_text(function):
    with pytest.raises(TypeError, match=r"tf_config must be TF_CONFIG's JSON text .*\{'task'"):
        globals()[function]({"task": {"type": "worker"}})


@requires_estimator
@pytest.mark.parametrize("num_steps", [0, -3, 2.5, None])
def test_stop_at_local_step_hook_rejects_bad_num_steps(num_steps):
    with pytest.raises((TypeError, ValueError), match=r"num_steps must be"):
        StopAtLocalStepHook(num_steps)


def _run_config(monkeypatch, cluster, task_type, task_id=0):
    monkeypatch.setenv(
        "TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": task_type, "index": task_id}})
    )
    return tf.estimator.RunConfig()


CLUSTER = {"chief": ["h:1"], "worker": ["h:2", "h:3"], "ps": ["h:4"]}


@requires_estimator
@pytest.mark.parametrize(
    ("cluster", "task_type", "task_id", "index", "is_chief"),
    [
        (CLUSTER, "chief", 0, 0, True),
        (CLUSTER, "worker", 0, 1, False),
        (CLUSTER, "worker", 1, 2, False),
        ({"master": ["h:1"], "worker": ["h:2", "h:3"], "ps": ["h:4"]}, "master", 0, 0, True),
        ({"master": ["h:1"], "worker": ["h:2", "h:3"], "ps": ["h:4"]}, "worker", 1, 2, False),
    ],
)
def test_helper_takes_the_task_from_the_run_config(
    monkeypatch, cluster, task_type, task_id, index, is_chief
):
    config = _run_config(monkeypatch, cluster, task_type, task_id)
    easgd = ElasticAverageEstimatorHelper(TRAIN, config)
    assert (easgd.task_index, easgd.is_chief, easgd.num_workers) == (index, is_chief, 3)
    assert easgd.worker_device == f"/job:{task_type}/task:{task_id}"
    assert easgd.custom_getter.worker_device == easgd.worker_device
    with tf.Graph().as_default():
        opt = easgd.optimizer(tf.compat.v1.train.GradientDescentOptimizer(0.1))
    assert opt.communication_period == 10
    assert opt.moving_rate == pytest.approx(0.9 / 10 / 3)  # BETA / tau / number of workers.


@requires_estimator
def test_mode_keys_are_the_estimators():
    modes = tf.estimator.ModeKeys
    assert (modes.TRAIN, modes.EVAL, modes.PREDICT) == (TRAIN, EVAL, PREDICT)


@requires_estimator
def test_helper_is_one_worker_without_a_cluster():
    easgd = ElasticAverageEstimatorHelper(TRAIN, tf.estimator.RunConfig())
    assert (easgd.task_index, easgd.is_chief, easgd.num_workers) == (0, True, 1)
    assert easgd.worker_device == ""


@requires_estimator
@pytest.mark.parametrize("task_type", ["ps", "evaluator"])
def test_tasks_that_do_not_train_build_no_training_helper(monkeypatch, task_type):
    config = _run_config(monkeypatch, CLUSTER, task_type)
    with pytest.raises(ValueError, match=rf"Task '{task_type}' 0 does not train"):
        ElasticAverageEstimatorHelper(TRAIN, config)
    assert ElasticAverageEstimatorHelper(EVAL, config).custom_getter is None


@requires_estimator
def test_several_workers_need_a_ps(monkeypatch):
    config = _run_config(monkeypatch, {"chief": ["h:1"], "worker": ["h:2"]}, "chief")
    with pytest.raises(ValueError, match=r"2 workers but no 'ps' task"):
        ElasticAverageEstimatorHelper(TRAIN, config)


@requires_estimator
@pytest.mark.parametrize(
    ("mode", "config", "error", "match"),
    [
        ("training", "run_config", ValueError, r"mode must be one of .* got 'training'"),
        (TRAIN, {}, TypeError, r"config must be the model_fn's"),
    ],
)
def test_helper_rejects_bad_arguments(mode, config, error, match):
    if config == "run_config":
        config = tf.estimator.RunConfig()
    with pytest.raises(error, match=match):
        ElasticAverageEstimatorHelper(mode, config)


@requires_estimator
@pytest.mark.parametrize("mode", [EVAL, PREDICT])
def test_eval_and_predict_build_the_plain_model(mode):
    easgd = ElasticAverageEstimatorHelper(mode, tf.estimator.RunConfig())
    with tf.Graph().as_default():
        with easgd.variable_scope():
            _mlp({"pixels": tf.zeros([1, 64])})
        names = {v.op.name for v in tf.compat.v1.global_variables()}
        assert names == MODEL_NAMES
        assert not tf.compat.v1.local_variables()
        with pytest.raises(RuntimeError, match=r"optimizer\(\) is for TRAIN mode"):
            easgd.optimizer(tf.compat.v1.train.GradientDescentOptimizer(0.1))
        spec = easgd.estimator_spec(loss=tf.constant(0.0), predictions={"p": tf.zeros([1])})
    assert spec.scaffold.saver is None and not spec.training_hooks


@requires_estimator
def test_train_mode_needs_the_optimizer_and_keeps_the_users_scaffold():
    easgd = ElasticAverageEstimatorHelper(TRAIN, tf.estimator.RunConfig())
    with tf.Graph().as_default():
        with easgd.variable_scope():
            logits = _mlp({"pixels": tf.zeros([1, 64])})
        loss = tf.reduce_sum(logits)
        with pytest.raises(RuntimeError, match=r"call easgd.optimizer\(opt\)"):
            easgd.estimator_spec(loss=loss, train_op=tf.no_op())
        opt = easgd.optimizer(tf.compat.v1.train.GradientDescentOptimizer(0.1))
        with pytest.raises(RuntimeError, match=r"optimizer\(\) was called already"):
            easgd.optimizer(tf.compat.v1.train.GradientDescentOptimizer(0.1))
        train_op = opt.minimize(loss, global_step=tf.compat.v1.train.get_or_create_global_step())
        with pytest.raises(ValueError, match=r"Pass a Scaffold without saver"):
            easgd.scaffold(tf.compat.v1.train.Scaffold(saver=tf.compat.v1.train.Saver()))
        with pytest.raises(TypeError, match=r"takes the mode from the helper"):
            easgd.estimator_spec(mode=TRAIN, loss=loss, train_op=train_op)
        user_hook = tf.compat.v1.train.StopAtStepHook(num_steps=1)
        local_init_op = tf.no_op(name="user_local_init")
        spec = easgd.estimator_spec(
            loss=loss,
            train_op=train_op,
            training_hooks=[user_hook],
            scaffold=tf.compat.v1.train.Scaffold(local_init_op=local_init_op),
        )
    assert spec.training_hooks[0] is user_hook
    assert spec.training_hooks[1].is_chief
    assert spec.scaffold.local_init_op is local_init_op
    assert spec.scaffold.saver is not None


@pytest.fixture(scope="module")
def helper_run(tmp_path_factory, digits):
    """One worker trained for LOCAL_STEPS local steps with the helper's model_fn."""
    model_dir = tmp_path_factory.mktemp("helper")
    estimator = _estimator(helper_model_fn, model_dir)
    stop, read = StopAtLocalStepHook(LOCAL_STEPS), _ReadAtEnd()
    estimator.train(_input_fn(digits.x_train, digits.y_train, train=True), hooks=[stop, read])
    return estimator, model_dir, stop, read


@requires_estimator
def test_stop_at_local_step_hook_stops_after_local_steps(helper_run):
    estimator, _, stop, _ = helper_run
    assert stop.steps_run == LOCAL_STEPS
    # One exchange, one global step, every TAU local steps of the one worker.
    assert estimator.get_variable_value("global_step") == LOCAL_STEPS // TAU == 100


@requires_estimator
def test_checkpoint_holds_the_centre_under_plain_names(helper_run):
    _, model_dir, _, read = helper_run
    saved = _checkpoint(model_dir)
    assert set(saved) == MODEL_NAMES | {"global_step"}
    for name in MODEL_NAMES:
        np.testing.assert_array_equal(saved[name], read.centres[name])
        assert not np.allclose(saved[name], read.workers[name])  # Not the worker's copy.


@requires_estimator
def test_evaluation_and_prediction_use_the_centre(helper_run, digits):
    estimator, model_dir, _, _ = helper_run
    metrics = estimator.evaluate(_input_fn(digits.x_test, digits.y_test, train=False))
    expected = _numpy_accuracy(_checkpoint(model_dir), digits.x_test, digits.y_test)
    assert metrics["accuracy"] == pytest.approx(expected, abs=1e-6)
    assert metrics["accuracy"] >= TARGET_ACCURACY
    assert metrics["global_step"] == LOCAL_STEPS // TAU
    predicted = [p["class"] for p in estimator.predict(_input_fn(digits.x_test, None, train=False))]
    assert np.mean(np.array(predicted) == digits.y_test) == pytest.approx(expected, abs=1e-6)


@requires_estimator
def test_exported_model_holds_the_centre(helper_run, tmp_path):
    estimator, model_dir, _, _ = helper_run

    def serving_input():
        pixels = tf.compat.v1.placeholder(tf.float32, [None, 64])
        return tf.estimator.export.ServingInputReceiver({"pixels": pixels}, pixels)

    export_dir = estimator.export_saved_model(str(tmp_path), serving_input)
    exported = _checkpoint(pathlib.Path(export_dir.decode()) / "variables" / "variables")
    saved = _checkpoint(model_dir)
    assert set(exported) >= MODEL_NAMES
    for name in MODEL_NAMES:
        np.testing.assert_array_equal(exported[name], saved[name])


@requires_estimator
def test_train_steps_count_exchanges_not_local_steps(world, tmp_path, digits):
    del world  # TF1 (ref variables) and TF 2 graph mode (resource variables) alike.
    estimator = _estimator(helper_model_fn, tmp_path)
    train_input = _input_fn(digits.x_train, digits.y_train, train=True)
    counter = StopAtLocalStepHook(10**9)  # Counts; never stops here.
    estimator.train(train_input, steps=3, hooks=[counter])
    # steps=3 means three more global steps: 3 exchanges of the one worker, 3 * TAU local
    # steps. With W workers they would share the 3 exchanges.
    assert (counter.steps_run, estimator.get_variable_value("global_step")) == (3 * TAU, 3)
    counter = StopAtLocalStepHook(10**9)
    estimator.train(train_input, max_steps=5, hooks=[counter])
    assert (counter.steps_run, estimator.get_variable_value("global_step")) == (2 * TAU, 5)
    counter = StopAtLocalStepHook(2 * TAU + 1)
    estimator.train(train_input, hooks=[counter])
    assert (counter.steps_run, estimator.get_variable_value("global_step")) == (2 * TAU + 1, 7)


@requires_estimator
def test_plain_usage_without_the_helper(tmp_path, digits):
    estimator = _estimator(_documented_model_fn("## Without the helper"), tmp_path)
    estimator.train(
        _input_fn(digits.x_train, digits.y_train, train=True),
        max_steps=exchanges_for(LOCAL_STEPS, num_workers=1, communication_period=TAU),
    )
    # The default swapping_saver() wrote the global step too, so the plain eval graph
    # restores everything it has from the checkpoint.
    assert set(_checkpoint(tmp_path)) == MODEL_NAMES | {"global_step"}
    metrics = estimator.evaluate(_input_fn(digits.x_test, digits.y_test, train=False))
    assert metrics["global_step"] == LOCAL_STEPS // TAU
    assert metrics["accuracy"] >= TARGET_ACCURACY


@requires_estimator
def test_documented_example_runs(tmp_path, capsys):
    code = _documented_code("## A complete example")
    assert code.count('"/tmp/easgd_digits"') == 1
    namespace = {}
    exec(code.replace('"/tmp/easgd_digits"', repr(str(tmp_path))), namespace)  # noqa: S102
    metrics = namespace["metrics"]
    assert metrics["global_step"] == 250  # 1000 local steps, tau = 4, as the comment says.
    # Its test set, the last 297 digits, is harder than the stratified one of the other tests:
    # three runs gave 0.865, 0.886 and 0.896 (the shuffle is not seeded).
    assert metrics["accuracy"] >= 0.75
    assert "'global_step': 250" in capsys.readouterr().out
