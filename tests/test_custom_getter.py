"""ElasticAverageCustomGetter: names, collections, devices, partitions and reuse.

Placement tests only build graphs against a multi-ps ClusterSpec; no server is started.
"""

import numpy as np
import pytest
import tensorflow as tf
from conftest import is_resource

from tf_contrib_easgd import (
    GLOBAL_STEP,
    GLOBAL_VARIABLE_NAME,
    LOCAL_VARIABLE_NAME,
    ElasticAverageCustomGetter,
)

WORKER = "/job:worker/task:1"
CLUSTER = tf.train.ClusterSpec(
    {"ps": ["ps0:2222", "ps1:2222", "ps2:2222"], "worker": ["w0:2222", "w1:2222"]}
)
LOCAL = tf.compat.v1.GraphKeys.LOCAL_VARIABLES
GLOBAL = tf.compat.v1.GraphKeys.GLOBAL_VARIABLES
TRAINABLE = tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES


def _names(key):
    return sorted(v.op.name for v in tf.compat.v1.get_collection(key))


def _scopes(getter):
    setter = tf.compat.v1.train.replica_device_setter(worker_device=WORKER, cluster=CLUSTER)
    return tf.compat.v1.device(setter), tf.compat.v1.variable_scope("", custom_getter=getter)


def test_constants_keep_contrib_values():
    assert LOCAL_VARIABLE_NAME == "local_center_variable"
    assert GLOBAL_VARIABLE_NAME == "global_center_variable"
    assert GLOBAL_STEP == "global_step"


def test_names_collections_and_trainability(world):
    getter = ElasticAverageCustomGetter(WORKER)
    with tf.Graph().as_default():
        device, scope = _scopes(getter)
        with device, scope:
            w = tf.compat.v1.get_variable("w", [3], initializer=tf.compat.v1.ones_initializer())
        assert w.op.name == "w"
        assert is_resource(w) == (world == "tf2")
        assert _names(GLOBAL) == ["global_center_variable/w"]
        assert _names(LOCAL) == ["local_center_variable/w", "w"]
        assert _names(TRAINABLE) == ["w"]


def test_centres_round_robin_on_ps_and_copies_on_worker(world):
    getter = ElasticAverageCustomGetter(WORKER)
    with tf.Graph().as_default():
        device, scope = _scopes(getter)
        with device, scope:
            for name in ("a", "b", "c", "d"):
                tf.compat.v1.get_variable(name, [2])
        entries = getter.centered_variables()
    # replica_device_setter hands ps tasks out in turn; worker copies do not take a turn.
    assert [e.global_center.device for e in entries] == [
        "/job:ps/task:0",
        "/job:ps/task:1",
        "/job:ps/task:2",
        "/job:ps/task:0",
    ]
    assert {e.worker.device for e in entries} == {WORKER}
    assert {e.local_center.device for e in entries} == {WORKER}


def test_partitioned_variable_maps_partition_by_partition(world):
    getter = ElasticAverageCustomGetter(WORKER)
    with tf.Graph().as_default():
        device, scope = _scopes(getter)
        with device, scope:
            w = tf.compat.v1.get_variable(
                "w", [6, 2], partitioner=tf.compat.v1.fixed_size_partitioner(3)
            )
        parts = list(w)
        assert [p.op.name for p in parts] == ["w/part_0", "w/part_1", "w/part_2"]
        for index, part in enumerate(parts):
            entry = getter.find(part)
            assert entry.global_center.op.name == f"global_center_variable/w/part_{index}"
            assert entry.local_center.op.name == f"local_center_variable/w/part_{index}"
            assert entry.global_center.device == f"/job:ps/task:{index}"
            assert part.device == entry.local_center.device == WORKER
            assert entry.global_center.shape == part.shape == (2, 2)


@pytest.mark.parametrize("reuse", [True, tf.compat.v1.AUTO_REUSE])
def test_reuse_returns_the_worker_copy_without_a_second_centre(world, reuse):
    getter = ElasticAverageCustomGetter(WORKER)
    with tf.Graph().as_default():
        device, scope = _scopes(getter)
        with device, scope:
            with tf.compat.v1.variable_scope("layer", reuse=tf.compat.v1.AUTO_REUSE):
                first = tf.compat.v1.get_variable("w", [2])
            with tf.compat.v1.variable_scope("layer", reuse=reuse):
                again = tf.compat.v1.get_variable("w", [2])
        assert again is first
        assert _names(GLOBAL) == ["global_center_variable/layer/w"]
        assert len(getter.centered_variables()) == 1


def test_nested_scopes_prefix_the_centre_names(world):
    getter = ElasticAverageCustomGetter(WORKER)
    with tf.Graph().as_default():
        device, scope = _scopes(getter)
        with device, scope, tf.compat.v1.variable_scope("outer/inner"):
            tf.compat.v1.get_variable("w", [1])
        assert _names(GLOBAL) == ["global_center_variable/outer/inner/w"]
        assert _names(LOCAL) == ["local_center_variable/outer/inner/w", "outer/inner/w"]


def test_non_trainable_variables_pass_through(world):
    getter = ElasticAverageCustomGetter(WORKER)
    with tf.Graph().as_default():
        device, scope = _scopes(getter)
        with device, scope:
            step = tf.compat.v1.train.get_or_create_global_step()
            stat = tf.compat.v1.get_variable("moving_mean", [2], trainable=False)
            counter = tf.compat.v1.get_variable("counter", [], trainable=False, collections=[LOCAL])
        assert step.device == "/job:ps/task:0"
        assert stat.device == "/job:ps/task:1"
        assert counter.device == WORKER
        assert _names(GLOBAL) == ["global_step", "moving_mean"]
        assert _names(LOCAL) == ["counter"]
        assert getter.centered_variables() == []


def test_all_three_start_from_the_same_initializer(world):
    getter = ElasticAverageCustomGetter("")
    with tf.Graph().as_default(), tf.compat.v1.variable_scope("", custom_getter=getter):
        tf.compat.v1.get_variable("w", initializer=tf.constant([1.5, -2.0]))
        entry = getter.centered_variables()[0]
        with tf.compat.v1.Session() as session:
            session.run(
                [
                    tf.compat.v1.global_variables_initializer(),
                    tf.compat.v1.local_variables_initializer(),
                ]
            )
            values = session.run([entry.worker, entry.local_center, entry.global_center])
    for value in values:
        np.testing.assert_array_equal(value, [1.5, -2.0])


def test_user_collections_are_kept_on_the_worker_copy(world):
    getter = ElasticAverageCustomGetter("")
    with tf.Graph().as_default(), tf.compat.v1.variable_scope("", custom_getter=getter):
        tf.compat.v1.get_variable("w", [1], collections=[GLOBAL, "weights"])
        assert _names("weights") == ["w"]
        assert _names(LOCAL) == ["local_center_variable/w", "w"]


class _RecordingGetter:
    """Stands in for the next getter of the chain and records what it was given."""

    def __init__(self):
        self.calls = []

    def __call__(self, name, **kwargs):
        self.calls.append((name, kwargs))
        return name


def test_positional_arguments_are_taken_once():
    # Contrib's getter took `trainable` and `collections` both by position and by keyword in
    # one branch ("got multiple values for keyword argument"), and read kwargs["reuse"]
    # unguarded (API.md item 4). A chained getter passing everything by position, and one
    # passing no `reuse`, must both work.
    getter = ElasticAverageCustomGetter("/job:worker/task:0")
    recorder = _RecordingGetter()
    with tf.Graph().as_default():
        getter(recorder, "v", [2], tf.float32, None, None, None, False, [LOCAL])
        getter(recorder, "u", shape=[1], trainable=False)
    assert recorder.calls == [
        (
            "v",
            {
                "shape": [2],
                "dtype": tf.float32,
                "initializer": None,
                "regularizer": None,
                "reuse": None,
                "trainable": False,
                "collections": [LOCAL],
            },
        ),
        ("u", {"shape": [1], "trainable": False}),
    ]


def test_argument_both_by_position_and_keyword_is_a_type_error():
    getter = ElasticAverageCustomGetter("")
    with pytest.raises(TypeError, match="'shape' both by position and by keyword"):
        getter(_RecordingGetter(), "v", [2], shape=[2])


@pytest.mark.parametrize(
    ("device", "error", "message"),
    [
        (None, TypeError, "worker_device must be a device string.*None"),
        (3, TypeError, "worker_device must be a device string.*3"),
        ("/job:worker/task:x", ValueError, "worker_device is not a device.*task:x"),
    ],
)
def test_bad_worker_device(device, error, message):
    with pytest.raises(error, match=message):
        ElasticAverageCustomGetter(device)


def test_find_rejects_a_variable_made_elsewhere(world):
    getter = ElasticAverageCustomGetter("")
    with tf.Graph().as_default():
        plain = tf.compat.v1.get_variable("plain", [1])
        with pytest.raises(ValueError, match="'plain:0' was not created through"):
            getter.find(plain)
