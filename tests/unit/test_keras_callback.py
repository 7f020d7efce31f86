"""ElasticAverageCallback: Keras model.fit under EASGD, with in-process parameter servers.

The bad-input tests start no server. The cluster tests start their own servers (the
centre's names carry no container, so each test has a cluster of its own), run `model.fit`
eagerly with Keras 3 (this process's tf.keras) and check the values worked out by hand.
tf-keras runs in a fresh interpreter (TF_USE_LEGACY_KERAS must be set before TensorFlow is
first imported). Jobs of real processes: tests/test_keras_fit.py.
"""

import importlib
import importlib.util
import json

import numpy as np
import pytest
import tensorflow as tf
from clusters import cluster_and_worker_tasks
from processes import run_python_script

from tf_contrib_easgd import cluster_from_hosts
from tf_contrib_easgd.eager.variables import Averaged, centre_specs
from tf_contrib_easgd.keras import ElasticAverageCallback

keras = tf.keras

PS, W0, W1 = "localhost:2222", "localhost:2223", "localhost:2224"


def keras_3():
    """Whether this process's Keras is Keras 3 (TensorFlow 2.16 and later)."""
    return importlib.import_module("keras").__version__.startswith("3")


WORKER = cluster_from_hosts("worker", 0, PS, f"{W0},{W1}")


# --- Bad input: a clear error, naming the argument and the value, before anything starts ----


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"cluster": None}, TypeError, r"cluster must be the tf_contrib_easgd.ClusterTask .* "
         r"got None"),
        ({"cluster": {"ps": [PS], "worker": [W0]}}, TypeError, "got {'ps'"),
        ({"cluster": cluster_from_hosts("ps", 0, PS, W0)}, ValueError, "cluster is ps 0, a "
         "parameter server"),
        ({"communication_period": 0}, ValueError, "communication_period must be >= 1, got 0"),
        ({"communication_period": 2.5}, TypeError, "communication_period must be an int, got "
         "2.5"),
        ({"moving_rate": 0.0}, ValueError, r"moving_rate must be in \(0.0, 1.0\], got 0.0"),
        ({"moving_rate": 1.5}, ValueError, r"moving_rate must be in \(0.0, 1.0\], got 1.5"),
        ({"moving_rate": "0.5"}, TypeError, "moving_rate must be a number, got '0.5'"),
        ({"model_dir": 3}, TypeError, "model_dir must be a path or None, got 3"),
        ({"timeout_secs": -1}, ValueError, r"timeout_secs must be in \(0.0, inf\), got -1"),
        ({"timeout_secs": float("inf")}, ValueError, "timeout_secs must be a finite number of "
         "seconds, at most 9223372036, got inf"),
        ({"timeout_secs": 1e20}, ValueError, r"timeout_secs must be a finite .* got 1e\+20"),
        ({"save_checkpoint_steps": 0}, ValueError, "save_checkpoint_steps must be >= 1, got 0"),
        ({"stop_parameter_servers": "yes"}, TypeError, "stop_parameter_servers must be a bool"),
        ({"server": "grpc://localhost:1"}, TypeError, "server must be a tf.distribute.Server"),
        ({"overlap": 1}, TypeError, "overlap must be a bool, got 1"),
    ],
)  # fmt: skip
def test_bad_arguments_are_refused_at_construction(arguments, error, message):
    with pytest.raises(error, match=message):
        ElasticAverageCallback(**{"cluster": WORKER, **arguments})


def test_defaults():
    callback = ElasticAverageCallback(WORKER)
    assert callback.communication_period == 10
    assert callback.moving_rate == pytest.approx(0.9 / 10 / 2)  # As the optimizer's default.
    assert ElasticAverageCallback(WORKER, 4, 0.5).moving_rate == 0.5


def test_a_model_without_weights_is_refused_before_training():
    model = keras.Sequential([keras.layers.Dense(1)])  # No input shape: not built.
    model.compile("sgd", "mse")
    callback = ElasticAverageCallback(WORKER, timeout_secs=5)
    callback.set_model(model)
    with pytest.raises(ValueError, match="has no floating-point weights to average: build it"):
        callback.on_train_begin()


def test_graph_mode_is_refused():
    callback = ElasticAverageCallback(WORKER)
    with tf.Graph().as_default(), pytest.raises(ValueError, match="eager mode"):
        callback.on_train_begin()


# --- One exchange, worked out by hand -------------------------------------------------------


def _linear_model(kernel, bias, learning_rate, named=True):
    """One Dense unit on 2 inputs, SGD, mse; `named=False` leaves the layer's and the
    model's names to Keras, which numbers them per process."""
    model = keras.Sequential(
        [
            keras.Input((2,)),
            keras.layers.Dense(
                1,
                name="dense" if named else None,
                kernel_initializer=keras.initializers.Constant(kernel),
                bias_initializer=keras.initializers.Constant(bias),
            ),
        ],
        name="linear" if named else None,
    )
    model.compile(optimizer=keras.optimizers.SGD(learning_rate), loss="mse")
    return model


class _Recorder(keras.callbacks.Callback):
    """Records the worker's weights and the centre after each batch (after the EASGD
    callback's own work of that batch)."""

    def __init__(self, easgd):
        super().__init__()
        self.easgd = easgd
        self.rows = []

    def on_train_batch_end(self, batch, logs=None):
        kernel, bias = self.model.get_weights()
        centre_kernel, centre_bias = self.easgd.centre_weights()
        self.rows.append(
            (*kernel[:, 0], *bias, *centre_kernel[:, 0], *centre_bias, self.easgd.global_step)
        )


@pytest.mark.cluster
def test_one_exchange_moves_worker_and_centre_by_the_same_d(tmp_path):
    # One worker, two ps: the kernel's centre (8 bytes) on ps 0, the bias's on ps 1.
    # Input [1, 1], target 0, mse: prediction p = k1 + k2 + b, gradient 2p for each
    # weight; SGD lr 0.1, tau 2, alpha 0.5. The chief initialises the centre from its
    # initial weights k = [0.5, 0.5], b = 0.
    # step 1: p = 1.0,  grad 2.0:  k = 0.3,  b = -0.2
    # step 2: p = 0.4,  grad 0.8:  k = 0.22, b = -0.28; exchange:
    #         d_k = 0.5 * (0.22 - 0.5) = -0.14, d_b = 0.5 * (-0.28 - 0) = -0.14
    #         worker k = 0.22 + 0.14 = 0.36, b = -0.14; centre k = 0.5 - 0.14 = 0.36,
    #         b = 0 - 0.14 = -0.14; global_step 1
    # step 3: p = 0.58, grad 1.16: k = 0.244, b = -0.256; the centre stays.
    # Rows: (k1, k2, b, centre k1, centre k2, centre b, global_step) after each batch.
    cluster, (task,) = cluster_and_worker_tasks(num_ps=2, num_workers=1)
    model = _linear_model(0.5, 0.0, learning_rate=0.1)
    easgd = ElasticAverageCallback(
        task, 2, 0.5, model_dir=tmp_path, server=cluster.servers["worker", 0], timeout_secs=30
    )
    recorder = _Recorder(easgd)
    x, y = np.ones((3, 2), np.float32), np.zeros((3, 1), np.float32)
    model.fit(x, y, batch_size=1, shuffle=False, verbose=0, callbacks=[easgd, recorder])
    np.testing.assert_allclose(
        recorder.rows,
        [
            (0.3, 0.3, -0.2, 0.5, 0.5, 0.0, 0),
            (0.36, 0.36, -0.14, 0.36, 0.36, -0.14, 1),
            (0.244, 0.244, -0.256, 0.36, 0.36, -0.14, 1),
        ],
        rtol=1e-6,
        atol=1e-7,
    )
    assert easgd.centre_found == "initialised"
    assert (easgd.local_steps, easgd.exchanges) == (3, 1)
    # After fit the model holds the centre; the chief wrote it where plain Keras loads it.
    np.testing.assert_allclose(model.get_weights()[0][:, 0], [0.36, 0.36], rtol=1e-6)
    loaded = keras.models.load_model(tmp_path / "centre.keras")
    np.testing.assert_allclose(loaded.get_weights()[1], [-0.14], rtol=1e-6)
    plain = _linear_model(0.0, 0.0, 0.1)
    plain.load_weights(tmp_path / "centre.weights.h5")
    np.testing.assert_allclose(plain.get_weights()[0][:, 0], [0.36, 0.36], rtol=1e-6)
    # And a checkpoint of the centre, for a restarted parameter server.
    reader = tf.train.load_checkpoint(str(tmp_path))
    assert reader.get_tensor("global_step") == 1
    centres = [name for name in reader.get_variable_to_shape_map() if "center" in name]
    # Named by position and short name, whatever Keras called the layer.
    assert sorted(centres) == [
        "global_center_variable/weight_0_kernel",
        "global_center_variable/weight_1_bias",
    ]


def test_centres_are_named_alike_whatever_this_process_built_before():
    # Keras numbers unnamed layers per process: a chief that built another model first
    # calls its layers dense_2 and dense_3 where another worker has dense and dense_1.
    # The centres' names must not depend on that, or the other worker waits for centres
    # the chief never makes.
    def unnamed_model():
        return keras.Sequential([keras.Input((3,)), keras.layers.Dense(4), keras.layers.Dense(2)])

    first = centre_specs(Averaged(unnamed_model()).collect())  # The callback's weights.
    later = centre_specs(Averaged(unnamed_model()).collect())
    assert first == later
    assert [spec.name for spec in first] == [
        "weight_0_kernel", "weight_1_bias", "weight_2_kernel", "weight_3_bias"
    ]  # fmt: skip
    assert [spec.shape for spec in first] == [(3, 4), (4,), (4, 2), (2,)]


class _WorkerRecorder(keras.callbacks.Callback):
    """Records the worker's weights after each batch."""

    def __init__(self):
        super().__init__()
        self.rows = []

    def on_train_batch_end(self, batch, logs=None):
        kernel, bias = self.model.get_weights()
        self.rows.append((*kernel[:, 0], *bias))


@pytest.mark.cluster
def test_an_overlapped_exchange_lands_one_period_later():
    # As above (one worker, lr 0.1, tau 2, alpha 0.5, p = k1 + k2 + b, gradients 2p), with
    # overlap: an exchange step sends the weights and lands the previous exchange's d.
    # step 1: k = 0.3, b = -0.2
    # step 2: k = 0.22, b = -0.28; sent: d = 0.5 (0.22 - 0.5) = 0.5 (-0.28 - 0) = -0.14,
    #         centre k = 0.36, b = -0.14; the worker keeps its weights
    # step 3: p = 0.16,  k = 0.188,  b = -0.312
    # step 4: p = 0.064, k = 0.1752, b = -0.3248; lands d: k = 0.3152, b = -0.1848; sent:
    #         d_k = 0.5 (0.3152 - 0.36) = -0.0224, d_b = 0.5 (-0.1848 + 0.14) = -0.0224,
    #         centre k = 0.3376, b = -0.1624
    # step 5: p = 0.4456, k = 0.22608, b = -0.27392; the end of fit lands the last d and
    #         gives the model the centre: k = 0.3376, b = -0.1624, global_step 2.
    cluster, (task,) = cluster_and_worker_tasks(num_ps=1, num_workers=1)
    model = _linear_model(0.5, 0.0, learning_rate=0.1)
    easgd = ElasticAverageCallback(
        task, 2, 0.5, server=cluster.servers["worker", 0], timeout_secs=30, overlap=True
    )
    recorder = _WorkerRecorder()
    x, y = np.ones((5, 2), np.float32), np.zeros((5, 1), np.float32)
    model.fit(x, y, batch_size=1, shuffle=False, verbose=0, callbacks=[easgd, recorder])
    np.testing.assert_allclose(
        recorder.rows,
        [
            (0.3, 0.3, -0.2),
            (0.22, 0.22, -0.28),
            (0.188, 0.188, -0.312),
            (0.3152, 0.3152, -0.1848),
            (0.22608, 0.22608, -0.27392),
        ],
        rtol=1e-5,
    )
    kernel, bias = model.get_weights()
    np.testing.assert_allclose([*kernel[:, 0], *bias], [0.3376, 0.3376, -0.1624], rtol=1e-5)
    assert (easgd.exchanges, easgd.global_step) == (2, 2)


@pytest.mark.cluster
def test_a_restarted_parameter_server_gets_the_centre_back_from_the_checkpoint(tmp_path):
    # First job: 4 batches at tau 2 (as above, two exchanges), the chief checkpoints. Then
    # a new cluster (a parameter server that came back empty) with the same model_dir: the
    # chief restores that centre, and a worker starts from it, not from its own weights.
    cluster, (task,) = cluster_and_worker_tasks(num_ps=1, num_workers=1)
    x, y = np.ones((4, 2), np.float32), np.zeros((4, 1), np.float32)
    first = ElasticAverageCallback(
        task, 2, 0.5, tmp_path, server=cluster.servers["worker", 0], timeout_secs=30
    )
    model = _linear_model(0.5, 0.0, learning_rate=0.1)
    model.fit(x, y, batch_size=1, shuffle=False, verbose=0, callbacks=[first])
    centre = model.get_weights()
    cluster, (task,) = cluster_and_worker_tasks(num_ps=1, num_workers=1)
    again = ElasticAverageCallback(
        task, 2, 0.5, tmp_path, server=cluster.servers["worker", 0], timeout_secs=30
    )
    restarted = _linear_model(3.0, 3.0, learning_rate=0.0)  # lr 0: only exchanges move it.
    restarted.fit(x, y, batch_size=1, shuffle=False, verbose=0, callbacks=[again])
    assert again.centre_found == "restored"
    assert again.global_step == 2 + 2  # The checkpoint's two exchanges, then two more.
    np.testing.assert_allclose(restarted.get_weights()[0], centre[0], rtol=1e-6)


@pytest.mark.cluster
def test_a_worker_whose_keras_named_its_layers_otherwise_still_finds_the_centre():
    # The chief trains first, alone (it waits 2 s for worker 1 at the end, then goes on);
    # worker 1 then builds its model after one more (Keras calls its layer dense_N+2, not
    # the chief's dense_N) and starts from the centre the chief left: lr 0, so its weights
    # are the centre's, [0.5, 0.5] and 0, not its own 3.0s.
    cluster, tasks = cluster_and_worker_tasks(num_ps=1, num_workers=2)
    x, y = np.ones((2, 2), np.float32), np.zeros((2, 1), np.float32)
    chief_model = _linear_model(0.5, 0.0, 0.0, named=False)
    chief = ElasticAverageCallback(
        tasks[0], 2, 0.5, server=cluster.servers["worker", 0], timeout_secs=2.0,
        stop_parameter_servers=False,
    )  # fmt: skip
    chief_model.fit(x, y, batch_size=1, verbose=0, callbacks=[chief])
    _linear_model(1.0, 1.0, 0.0, named=False)  # Another model first: the numbers move on.
    worker_model = _linear_model(3.0, 3.0, 0.0, named=False)
    assert worker_model.layers[0].name != chief_model.layers[0].name
    worker = ElasticAverageCallback(
        tasks[1], 2, 0.5, server=cluster.servers["worker", 1], timeout_secs=10.0
    )
    worker_model.fit(x, y, batch_size=1, verbose=0, callbacks=[worker])
    assert worker.centre_found == "waited"
    kernel, bias = worker_model.get_weights()
    np.testing.assert_allclose([*kernel[:, 0], *bias], [0.5, 0.5, 0.0])


@pytest.mark.cluster
def test_a_worker_without_its_chief_gives_up_after_the_timeout():
    cluster, (_, task) = cluster_and_worker_tasks(num_ps=1, num_workers=2)
    model = _linear_model(0.0, 0.0, 0.1)
    easgd = ElasticAverageCallback(task, timeout_secs=1.0, server=cluster.servers["worker", 1])
    with pytest.raises(TimeoutError, match="did not initialise the centre within 1 s"):
        model.fit(np.ones((2, 2)), np.ones((2, 1)), verbose=0, callbacks=[easgd])


# --- tf-keras (Keras 2), in a fresh interpreter ---------------------------------------------
# `tf.keras` is tf-keras only with TF_USE_LEGACY_KERAS=1 set before TensorFlow's first
# import: the same exchange as above, in a process of its own.
TF_KERAS_SCRIPT = """
import os
os.environ["TF_USE_LEGACY_KERAS"] = "1"
import json
import numpy as np
import portpicker
import tensorflow as tf
from tf_contrib_easgd import cluster_from_hosts
from tf_contrib_easgd.keras import ElasticAverageCallback

ps, worker = (f"localhost:{portpicker.pick_unused_port()}" for _ in range(2))
task = cluster_from_hosts("worker", 0, ps, worker)
ps_server = tf.distribute.Server(task.cluster_spec(), job_name="ps", task_index=0)
model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(
    1, kernel_initializer=tf.keras.initializers.Constant(0.5))])
model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss="mse")
easgd = ElasticAverageCallback(task, 2, 0.5, timeout_secs=30)
rows = []
record = tf.keras.callbacks.LambdaCallback(on_batch_end=lambda batch, logs: rows.append(
    [float(w) for w in np.concatenate([v.ravel() for v in model.get_weights()
                                       + easgd.centre_weights()])] + [easgd.global_step]))
model.fit(np.ones((3, 2)), np.zeros((3, 1)), batch_size=1, shuffle=False, verbose=0,
          callbacks=[easgd, record])
print("keras:", type(model).__module__.split(".")[0])
print("rows:", json.dumps(rows))
"""


@pytest.mark.subprocess
@pytest.mark.skipif(importlib.util.find_spec("tf_keras") is None, reason="needs tf-keras")
def test_tf_keras_makes_the_same_exchange(tmp_path):
    done = run_python_script(TF_KERAS_SCRIPT, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "keras: tf_keras" in done.stdout
    rows = json.loads(done.stdout.split("rows: ", 1)[1])
    # The rows of test_one_exchange_moves_worker_and_centre_by_the_same_d.
    np.testing.assert_allclose(
        rows,
        [
            (0.3, 0.3, -0.2, 0.5, 0.5, 0.0, 0),
            (0.36, 0.36, -0.14, 0.36, 0.36, -0.14, 1),
            (0.244, 0.244, -0.256, 0.36, 0.36, -0.14, 1),
        ],
        rtol=1e-6,
        atol=1e-7,
    )


@pytest.mark.skipif(
    importlib.util.find_spec("tf_keras") is None or not keras_3(),
    reason="needs tf-keras beside Keras 3 (on TF 2.15 both are Keras 2: importing tf_keras "
    "beside tf.keras breaks this process's Keras 2 models)",
)
def test_a_model_of_the_other_keras_is_refused_clearly():
    # This process's tf.keras is Keras 3; a tf-keras model imported by name is not its.
    import tf_keras  # noqa: PLC0415

    model = tf_keras.Sequential([tf_keras.Input((2,)), tf_keras.layers.Dense(1)])
    with pytest.raises(TypeError, match=r"a callback of tf.keras \(keras 3.*TF_USE_LEGACY_KERAS"):
        ElasticAverageCallback(WORKER).set_model(model)
