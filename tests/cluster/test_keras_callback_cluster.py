"""In-process cluster tests: ElasticAverageCallback, Keras model.fit under EASGD.

The tests of its other tiers are in tests/unit/test_keras_callback.py.
"""

import numpy as np
import pytest
import tensorflow as tf
from clusters import cluster_and_worker_tasks

from tf_contrib_easgd.keras import ElasticAverageCallback

keras = tf.keras


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


class _WorkerRecorder(keras.callbacks.Callback):
    """Records the worker's weights after each batch."""

    def __init__(self):
        super().__init__()
        self.rows = []

    def on_train_batch_end(self, batch, logs=None):
        kernel, bias = self.model.get_weights()
        self.rows.append((*kernel[:, 0], *bias))


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


def test_a_worker_without_its_chief_gives_up_after_the_timeout():
    cluster, (_, task) = cluster_and_worker_tasks(num_ps=1, num_workers=2)
    model = _linear_model(0.0, 0.0, 0.1)
    easgd = ElasticAverageCallback(task, timeout_secs=1.0, server=cluster.servers["worker", 1])
    with pytest.raises(TimeoutError, match="did not initialise the centre within 1 s"):
        model.fit(np.ones((2, 2)), np.ones((2, 1)), verbose=0, callbacks=[easgd])
