"""ElasticAverageCallback: Keras model.fit under EASGD, with in-process parameter servers.

The bad-input tests start no server. The cluster tests (in
tests/cluster/test_keras_callback_cluster.py) start their own servers (the
centre's names carry no container, so each test has a cluster of its own), run `model.fit`
eagerly with Keras 3 (this process's tf.keras) and check the values worked out by hand.
tf-keras runs in a fresh interpreter (TF_USE_LEGACY_KERAS must be set before TensorFlow is
first imported): tests/subprocess/test_keras_callback_subprocess.py. Jobs of real
processes: tests/e2e/test_keras_fit.py.
"""

import importlib
import importlib.util

import pytest
import tensorflow as tf

from tf_contrib_easgd import cluster_from_hosts
from tf_contrib_easgd.eager.variables import Averaged, centre_specs
from tf_contrib_easgd.keras import ElasticAverageCallback

keras = tf.keras


PS, W0, W1 = "localhost:2222", "localhost:2223", "localhost:2224"


def keras_3():
    """Whether this process's Keras is Keras 3 (TensorFlow 2.16 and later)."""
    return importlib.import_module("keras").__version__.startswith("3")


WORKER = cluster_from_hosts("worker", 0, PS, f"{W0},{W1}")


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
    assert callback.moving_rate == pytest.approx(0.9 / 2)  # beta / W (the optimizer: / 10 too).
    assert ElasticAverageCallback(WORKER, 4, 0.5).moving_rate == 0.5


def test_the_default_moving_rate_is_at_most_a_half_with_overlap():
    one = cluster_from_hosts("worker", 0, PS, W0)
    # One worker: 0.9 / 1 = 0.9, but a late move that large takes back what the worker
    # learnt since, so with overlap the default stops at 0.5; two workers: 0.45 either way.
    assert ElasticAverageCallback(one).moving_rate == pytest.approx(0.9)
    assert ElasticAverageCallback(one, overlap=True).moving_rate == 0.5
    assert ElasticAverageCallback(WORKER, overlap=True).moving_rate == pytest.approx(0.45)
    assert ElasticAverageCallback(one, moving_rate=0.8, overlap=True).moving_rate == 0.8


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
