"""ElasticAverageWorker: EASGD in a TF 2 custom training loop, with in-process servers.

The bad-input tests start no server. The cluster tests (in
tests/cluster/test_eager_worker_cluster.py) start their own servers (the
centre's names carry no container, so each test has a cluster of its own), train eagerly
in a `tf.function` and check the values worked out by hand. The worker is eager only:
TF1's ref variables cannot be trained by an eager loop, so there is one variable world
here (graph mode is refused). Jobs of real processes: tests/e2e/test_custom_loop.py.
"""

import threading

import numpy as np
import pytest
import tensorflow as tf

from tf_contrib_easgd import ElasticAverageWorker, cluster_from_hosts

DEADLINE_SECS = 30  # Of every wait in a test that ends by itself.


PS, W0, W1 = "localhost:2222", "localhost:2223", "localhost:2224"


WORKER = cluster_from_hosts("worker", 0, PS, f"{W0},{W1}")


def _floats():
    return [tf.Variable([0.5, 0.5], name="kernel"), tf.Variable(0.0, name="bias")]


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"cluster": None}, TypeError, r"cluster must be the tf_contrib_easgd.ClusterTask .* "
         r"got None"),
        ({"cluster": cluster_from_hosts("ps", 0, PS, W0)}, ValueError, "cluster is ps 0, a "
         "parameter server"),
        ({"variables": None}, TypeError, "variables must be a list of tf.Variables .* got None"),
        ({"variables": []}, ValueError, "variables is empty: pass the variables to average"),
        ({"variables": [np.zeros(2)]}, TypeError, r"variables\[0\] must be a tf.Variable or a "
         "Keras variable, got array"),
        ({"variables": _floats() + [tf.Variable(3, name="count")]}, ValueError,
         r"variables\[2\] \('count:0'\) is int32: only floating-point variables have a centre"),
        ({"communication_period": 0}, ValueError, "communication_period must be >= 1, got 0"),
        ({"communication_period": -3}, ValueError, "communication_period must be >= 1, got -3"),
        ({"moving_rate": 1.5}, ValueError, r"moving_rate must be in \(0.0, 1.0\], got 1.5"),
        ({"overlap": "no"}, TypeError, "overlap must be a bool, got 'no'"),
        ({"model_dir": 3}, TypeError, "model_dir must be a path or None, got 3"),
        ({"timeout_secs": 0}, ValueError, r"timeout_secs must be in \(0.0, inf\), got 0"),
        ({"timeout_secs": "60"}, TypeError, "timeout_secs must be a number, got '60'"),
        ({"timeout_secs": None}, TypeError, "timeout_secs must be a number of seconds, got None"),
        # Accepted once, these failed at start() (OverflowError, ValueError): no wait takes
        # more than threading.TIMEOUT_MAX, 9223372036 s.
        ({"timeout_secs": float("inf")}, ValueError, "timeout_secs must be a finite number of "
         "seconds, at most 9223372036, got inf"),
        ({"timeout_secs": 1e20}, ValueError, r"timeout_secs must be a finite number .* got "
         r"1e\+20"),
        ({"save_checkpoint_steps": 0}, ValueError, "save_checkpoint_steps must be >= 1, got 0"),
        ({"save_checkpoint_steps": 2.5}, TypeError, "save_checkpoint_steps must be an int, got "
         "2.5"),
        ({"stop_parameter_servers": None}, TypeError, "stop_parameter_servers must be a bool, "
         "got None"),
        ({"server": "grpc://localhost:1"}, TypeError, "server must be a tf.distribute.Server or "
         "None, got 'grpc://localhost:1'"),
    ],
)  # fmt: skip
def test_bad_arguments_are_refused_at_construction(arguments, error, message):
    with pytest.raises(error, match=message):
        ElasticAverageWorker(**{"cluster": WORKER, "variables": _floats(), **arguments})


def test_defaults_and_duplicates():
    kernel, bias = _floats()
    worker = ElasticAverageWorker(WORKER, [kernel, bias, kernel])
    assert [id(v) for v in worker._averaged.collect()] == [id(kernel), id(bias)]  # Once each.
    assert worker.communication_period == 10
    assert worker.moving_rate == pytest.approx(0.9 / 2)  # beta / W (the optimizer: / 10 too).
    assert not worker.started
    assert worker.centre_found is None


def test_variables_made_by_the_first_step_are_refused_at_start():
    # A Keras model without an Input and a tf.Module that makes its variables on its first
    # call have none when the loop starts the worker: a clear error, before any server (the
    # cluster's addresses have none: reaching it would fail otherwise).
    class Lazy(tf.Module):
        def __call__(self, x):
            if not hasattr(self, "w"):
                self.w = tf.Variable(tf.zeros([x.shape[-1], 1]))
            return x @ self.w

    unbuilt = tf.keras.Sequential([tf.keras.layers.Dense(1)], name="unbuilt")
    for model, name in ((unbuilt, "unbuilt"), (Lazy(name="lazy"), "lazy")):
        worker = ElasticAverageWorker(WORKER, model, timeout_secs=1)
        with pytest.raises(ValueError, match=f"'{name}' has no floating-point variables yet"):
            worker.start()
        assert not worker.started


def test_a_step_or_an_end_before_start_is_refused():
    worker = ElasticAverageWorker(WORKER, _floats())
    for call in ("step", "end", "save_checkpoint", "centre_values"):
        with pytest.raises(RuntimeError, match=rf"{call}\(\) before start\(\)"):
            getattr(worker, call)()


def test_graph_mode_is_refused():
    with tf.Graph().as_default():
        variables = _floats()  # Graph variables: nothing an eager loop trains.
        with pytest.raises(ValueError, match="ElasticAverageWorker works with a custom training"):
            ElasticAverageWorker(WORKER, variables)


class _SilentLink:
    """A link to parameter servers that never answer an exchange (until the test lets it
    end, at most DEADLINE_SECS later); its session counts as open."""

    connected = True

    def __init__(self, release):
        self.release = release

    def start_values(self):
        return [np.zeros(2, np.float32)]

    def exchange(self, values):
        self.release.wait(DEADLINE_SECS)
        return [np.zeros(2, np.float32)], 1

    def close(self):
        self.connected = False


class _SilentWorker(ElasticAverageWorker):
    link = None

    def _make_link(self):
        return self.link


def test_an_overlapped_exchange_that_never_ends_is_a_timeout_error_not_a_hang():
    # The second step lands the first exchange, which has not ended when the worker's
    # deadline (0.2 s) runs out, however fast the machine: a TimeoutError naming it.
    release = threading.Event()
    worker = _SilentWorker(WORKER, [tf.Variable([1.0, 2.0])], 1, overlap=True, timeout_secs=0.2)
    worker.link = _SilentLink(release)
    try:
        worker.start()
        worker.step()  # Sent off; it never ends.
        with pytest.raises(TimeoutError, match=r"worker 0 waited 0.2 s \(timeout_secs\) for"):
            worker.step()
        assert worker.exchanges == 0
    finally:
        release.set()
        worker.close()
