"""ElasticAverageCustomGetter: names, collections, devices, partitions and reuse.

Placement tests only build graphs against a multi-ps ClusterSpec; no server is started.
"""

import numpy as np
import pytest
import tensorflow as tf
from clusters import is_resource

from tf_contrib_easgd import (
    GLOBAL_STEP,
    GLOBAL_VARIABLE_NAME,
    LOCAL_VARIABLE_NAME,
    ElasticAverageCustomGetter,
    ElasticAverageOptimizer,
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


def test_elastic_distance_is_the_norm_of_worker_minus_centre(world):
    getter = ElasticAverageCustomGetter("")
    with tf.Graph().as_default(), tf.compat.v1.variable_scope("", custom_getter=getter):
        with pytest.raises(ValueError, match="needs the model"):
            getter.elastic_distance()
        w = tf.compat.v1.get_variable("w", initializer=tf.constant([1.0, 2.0]))
        b = tf.compat.v1.get_variable("b", initializer=tf.constant(-1.0), partitioner=None)
        distance = getter.elastic_distance()
        move = [tf.compat.v1.assign_add(w, [3.0, 0.0]), tf.compat.v1.assign_add(b, 4.0)]
        with tf.compat.v1.Session() as session:
            session.run(
                [
                    tf.compat.v1.global_variables_initializer(),
                    tf.compat.v1.local_variables_initializer(),
                ]
            )
            at_start = session.run(distance)
            session.run(move)
            moved = session.run(distance)
    # All start at the centre: 0. Then w is [3, 0] and b 4 away from their centres:
    # sqrt(3^2 + 0^2 + 4^2) = 5.
    assert distance.name == "elastic_distance:0"
    assert at_start == 0.0
    assert moved == pytest.approx(5.0)


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
    # unguarded (contrib fix 4). A chained getter passing everything by position, and one
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


# Model weights made with tf.Variable, as tutorials of the MNIST softmax kind did, never go
# through a variable scope's custom getter (on TF 1 either). The optimizer refuses them,
# naming the first; docs/MIGRATING.md gives the fix checked here: tf.compat.v1.get_variable
# with a name and the same initial value, inside the getter's scope.
def test_tf_variable_weights_are_refused_and_get_variable_is_the_fix(world):
    def train_op(make_weights):
        getter = ElasticAverageCustomGetter("")
        with tf.compat.v1.variable_scope("softmax", custom_getter=getter):
            x = tf.compat.v1.placeholder(tf.float32, [None, 4])
            weights, bias = make_weights()
            loss = tf.reduce_sum(tf.matmul(x, weights) + bias)
        opt = ElasticAverageOptimizer(
            tf.compat.v1.train.GradientDescentOptimizer(0.5), num_worker=1, ea_custom_getter=getter
        )
        step = tf.compat.v1.train.get_or_create_global_step()
        return x, weights, opt.minimize(loss, global_step=step), opt

    def with_variable():  # tf_upgrade_v2 and easgd-migrate leave this as it is.
        return tf.compat.v1.Variable(tf.zeros([4, 3])), tf.compat.v1.Variable(tf.zeros([3]))

    def with_get_variable():  # The fix: a name, the same initial value.
        return (
            tf.compat.v1.get_variable("W", initializer=tf.zeros([4, 3])),
            tf.compat.v1.get_variable("b", initializer=tf.zeros([3])),
        )

    refused = r"'softmax/Variable:0' was not created through"
    with tf.Graph().as_default(), pytest.raises(ValueError, match=refused):
        train_op(with_variable)
    with tf.Graph().as_default():
        x, weights, train, opt = train_op(with_get_variable)
        init = opt.get_init_op(0)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(tf.compat.v1.local_variables_initializer())
            session.run(init)
            session.run(train, {x: np.ones([2, 4], np.float32)})
            # d(loss)/dW = the column sums of x, 2 each; one SGD step of 0.5 from 0: -1; the
            # first exchange comes only after communication_period = 10 steps.
            np.testing.assert_allclose(session.run(weights), -np.ones([4, 3]))


# --- Contrib's private attributes -----------------------------------------------------------
# TensorFlow's own contrib EASGD test reads `ea_custom_getter._global_map[v]`, and scripts
# written against contrib read `_local_map` and the optimizer's private attributes. What
# contrib 1.15 held was established by running it (tensorflow==1.15.5): see CentreMap.


def _contrib_model(getter):
    """Builds, in the default graph, what contrib's test builds plus a partitioned
    variable, a reused one and a non-trainable one; returns (v, w, p, step, opt)."""
    device, scope = _scopes(getter)
    with device, scope:
        v = tf.compat.v1.get_variable("v", initializer=[1.0, 2.0])
        w = tf.compat.v1.get_variable("w", initializer=[2.0, 1.0])
        p = tf.compat.v1.get_variable(
            "p", [4, 2], partitioner=tf.compat.v1.fixed_size_partitioner(2)
        )
        with tf.compat.v1.variable_scope("", reuse=True):
            assert tf.compat.v1.get_variable("v") is v
        with tf.compat.v1.variable_scope("", reuse=tf.compat.v1.AUTO_REUSE):
            assert tf.compat.v1.get_variable("w") is w
        step = tf.compat.v1.train.get_or_create_global_step()
    opt = ElasticAverageOptimizer(
        tf.compat.v1.train.GradientDescentOptimizer(0.5),
        num_worker=2,
        ea_custom_getter=getter,
        communication_period=4,
    )
    return v, w, p, step, opt


def test_contrib_maps_take_worker_copies_and_partitions(world):
    getter = ElasticAverageCustomGetter(WORKER)
    with tf.Graph().as_default():
        v, w, p, step, _ = _contrib_model(getter)
        parts = list(p)
        # Contrib's testPS2TasksWithClusterSpecClass, with this cluster's three ps tasks.
        v_g, w_g = getter._global_map[v], getter._global_map[w]
        assert v_g is getter.find(v).global_center
        assert (v.device, v_g.device, w.device, w_g.device) == (
            WORKER,
            "/job:ps/task:0",
            WORKER,
            "/job:ps/task:1",
        )
        assert getter._local_map[v] is getter.find(v).local_center
        assert getter._local_map[v].op.name == "local_center_variable/v"
        # Keys: the worker copies, each partition on its own, in creation order; the reused
        # variables once. Values: the centre of the same partition.
        assert list(getter._global_map) == [v, w, *parts]
        assert len(getter._local_map) == 4
        for index, part in enumerate(parts):
            assert getter._global_map[part].op.name == f"global_center_variable/p/part_{index}"
            assert getter._local_map[part].op.name == f"local_center_variable/p/part_{index}"
        assert [value.op.name for value in getter._global_map.values()] == [
            "global_center_variable/v",
            "global_center_variable/w",
            "global_center_variable/p/part_0",
            "global_center_variable/p/part_1",
        ]
        # As in contrib: neither the PartitionedVariable nor a non-trainable variable is a
        # key; `in` and `get` answer, `[]` raises KeyError.
        assert p not in getter._global_map
        assert step not in getter._local_map
        assert getter._global_map.get(step, "absent") == "absent"
        with pytest.raises(KeyError, match="'p' is not a worker copy.*keys are its partitions"):
            getter._global_map[p]  # noqa: B018 (the lookup is the test)
        with pytest.raises(KeyError, match="global_step.*_local_map"):
            getter._local_map[step]  # noqa: B018
        # A variable's ref() is a key too; a centre is not.
        assert getter._global_map[v.ref()] is v_g
        assert v_g not in getter._global_map


def test_contrib_maps_need_no_hashable_variables(world):
    getter = ElasticAverageCustomGetter(WORKER)
    with tf.Graph().as_default():
        v, _, p, _, opt = _contrib_model(getter)
    # Outside the graph eager execution is on again in the TF 2 world, where a variable
    # cannot be hashed: a dict keyed by variables would fail here, the maps do not.
    if world == "tf2":
        with pytest.raises(TypeError, match="unhashable"):
            hash(v)
    assert v in getter._global_map
    assert getter._global_map[v].op.name == "global_center_variable/v"
    assert getter._local_map[list(p)[1]].op.name == "local_center_variable/p/part_1"
    assert opt._global_map == getter._global_map
    assert opt._local_map != getter._global_map  # Same keys, other values.


def test_contrib_maps_cannot_be_changed(world):
    getter = ElasticAverageCustomGetter(WORKER)
    with tf.Graph().as_default():
        v, w, _, _, opt = _contrib_model(getter)
        for owner in (getter, opt):
            for name in ("_local_map", "_global_map"):
                with pytest.raises(TypeError, match="does not support item assignment"):
                    getattr(owner, name)[v] = w
                with pytest.raises(TypeError, match="does not support item deletion"):
                    del getattr(owner, name)[v]
                with pytest.raises(AttributeError, match=name):
                    setattr(owner, name, {})
        assert getter._global_map[v] is getter.find(v).global_center


def test_optimizer_shares_the_getters_live_maps(world):
    getter = ElasticAverageCustomGetter(WORKER)
    with tf.Graph().as_default():
        v, *_, opt = _contrib_model(getter)
        # Contrib's optimizer held the getter's two dicts themselves: variables made after
        # the optimizer appear in them.
        assert opt._local_map is getter._local_map
        assert opt._global_map is getter._global_map
        device, scope = _scopes(getter)
        with device, scope:
            later = tf.compat.v1.get_variable("later", [3])
        assert opt._global_map[later] is getter.find(later).global_center
        assert len(opt._local_map) == 5
        assert v in opt._local_map


def test_optimizer_and_hook_keep_contribs_private_attributes(world):
    getter = ElasticAverageCustomGetter(WORKER)
    with tf.Graph().as_default():
        *_, opt = _contrib_model(getter)
        # What contrib 1.15's optimizer held, with the same meaning (moving_rate's default
        # computed: BETA / tau / num_worker = 0.9 / 4 / 2 = 0.1125).
        assert isinstance(opt._opt, tf.compat.v1.train.GradientDescentOptimizer)
        assert (opt._num_worker, opt._period, opt._synchronous) == (2, 4, False)
        assert opt._moving_rate == pytest.approx(0.1125)
        assert (opt._use_locking, opt._name) == (True, "ElasticAverageOptimizer")
        assert opt._local_step.op.name == "local_step"
        assert opt._local_step.dtype.base_dtype == tf.int32
        assert opt._local_step in tf.compat.v1.local_variables()
        # Contrib computed the default rho into `_rho`: moving_rate / learning_rate =
        # 0.1125 / 0.5 = 0.225 here.
        assert opt._rho == pytest.approx(0.225)
        # Contrib's hook: `_ea_optimizer`, `_is_chief`, `_task_index`, and after begin()
        # the init op as `_variable_init_op`.
        hook = opt.make_session_run_hook(is_chief=True, task_index=1)
        assert (hook._ea_optimizer, hook._is_chief, hook._task_index) == (opt, True, 1)
        assert hook._variable_init_op is None
        hook.begin()
        assert hook._variable_init_op.type == "NoOp"
