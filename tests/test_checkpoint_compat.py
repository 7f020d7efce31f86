"""Checkpoints move both ways between tf.contrib.opt's EASGD and this library.

contrib is gone from TF 2, so its side is a "contrib-named" graph built by hand in TF1 mode
(ref variables, as contrib ran): the variables, names, dtypes and collections that
`tf.contrib.opt.ElasticAverageCustomGetter` and `ElasticAverageOptimizer` made for a model
with variables `mlp/w` and `mlp/b`, a Momentum optimizer and a global step. The library's
side is built the ordinary way, in TF1 mode and in TF 2 graph mode (the `world` fixture).

Two savers are tried: the default `Saver()` of MonitoredTrainingSession (global variables:
the centres and the global step) and a "full" one over global and local variables (worker
copies, local centres, `local_step`, optimizer slots too).
"""

import contextlib

import numpy as np
import pytest
import tensorflow as tf
from conftest import is_resource

from tf_contrib_easgd import (
    GLOBAL_STEP,
    GLOBAL_VARIABLE_NAME,
    LOCAL_VARIABLE_NAME,
    ElasticAverageCustomGetter,
    ElasticAverageOptimizer,
)

DEVICE = "/cpu:0"
SHAPES = {"mlp/w": [2, 3], "mlp/b": [3]}
GLOBAL, LOCAL = "global", "local"

# Name -> (collection, dtype, shape) of every variable contrib made for this model.
CONTRIB_VARIABLES = {
    **{f"{GLOBAL_VARIABLE_NAME}/{n}": (GLOBAL, tf.float32, s) for n, s in SHAPES.items()},
    GLOBAL_STEP: (GLOBAL, tf.int64, []),
    **{n: (LOCAL, tf.float32, s) for n, s in SHAPES.items()},  # The worker copies.
    **{f"{LOCAL_VARIABLE_NAME}/{n}": (LOCAL, tf.float32, s) for n, s in SHAPES.items()},
    **{f"{n}/Momentum": (LOCAL, tf.float32, s) for n, s in SHAPES.items()},
    "local_step": (LOCAL, tf.int32, []),
}


def _value(name):
    """A value for `name` that no other variable has: a distinct offset plus a ramp."""
    _, dtype, shape = CONTRIB_VARIABLES[name]
    offset = 10 * (1 + sorted(CONTRIB_VARIABLES).index(name))  # At most 6 elements each.
    return (offset + np.arange(np.prod(shape, dtype=int))).reshape(shape).astype(dtype.name)


@contextlib.contextmanager
def _tf1_mode():
    """TF1 behaviour for the block; a no-op when the `world` fixture chose it already."""
    if not tf.executing_eagerly():
        yield
        return
    tf.compat.v1.disable_v2_behavior()
    try:
        yield
    finally:
        tf.compat.v1.reset_default_graph()
        tf.compat.v1.enable_v2_behavior()


def _build_contrib_graph():
    """Creates the contrib-named variables by hand; returns {name: variable}."""
    collections = {
        GLOBAL: [tf.compat.v1.GraphKeys.GLOBAL_VARIABLES],
        LOCAL: [tf.compat.v1.GraphKeys.LOCAL_VARIABLES],
    }
    variables = {}
    for name, (collection, dtype, shape) in CONTRIB_VARIABLES.items():
        extra = [tf.compat.v1.GraphKeys.GLOBAL_STEP] if name == GLOBAL_STEP else []
        variables[name] = tf.compat.v1.get_variable(
            name,
            shape,
            dtype,
            initializer=tf.compat.v1.zeros_initializer(),
            trainable=name in SHAPES,
            collections=collections[collection] + extra,
        )
    return variables


def _build_library_graph():
    """Builds the same model with this library; returns ({name: variable}, optimizer)."""
    getter = ElasticAverageCustomGetter(worker_device=DEVICE)
    with (
        tf.compat.v1.device(DEVICE),
        tf.compat.v1.variable_scope("", custom_getter=getter),
    ):
        with tf.compat.v1.variable_scope("mlp"):
            w = tf.compat.v1.get_variable("w", SHAPES["mlp/w"])
            b = tf.compat.v1.get_variable("b", SHAPES["mlp/b"])
        loss = tf.reduce_sum(tf.matmul(tf.ones([1, 2]), w) + b)
        global_step = tf.compat.v1.train.get_or_create_global_step()
        opt = ElasticAverageOptimizer(
            tf.compat.v1.train.MomentumOptimizer(0.1, 0.9),
            num_worker=2,
            ea_custom_getter=getter,
            communication_period=4,
            rho=0.0,
        )
        opt.minimize(loss, global_step=global_step)
    variables = tf.compat.v1.global_variables() + tf.compat.v1.local_variables()
    return {v.op.name: v for v in variables}, opt


def _collections():
    """Maps each variable name of the default graph to GLOBAL or LOCAL."""
    return {
        **{v.op.name: GLOBAL for v in tf.compat.v1.global_variables()},
        **{v.op.name: LOCAL for v in tf.compat.v1.local_variables()},
    }


def _saver(kind):
    """The `kind` Saver of the default graph: "default" (global variables) or "full"."""
    if kind == "default":
        return tf.compat.v1.train.Saver()  # What MonitoredTrainingSession's Scaffold makes.
    return tf.compat.v1.train.Saver(
        tf.compat.v1.global_variables() + tf.compat.v1.local_variables()
    )


def _write(variables, kind, path):
    """Sets every variable to its `_value` and saves with the `kind` saver."""
    assigns = [tf.compat.v1.assign(v, _value(name)) for name, v in variables.items()]
    saver = _saver(kind)
    with tf.compat.v1.Session() as session:
        session.run(assigns)
        return saver.save(session, path)


def _restore(variables, kind, checkpoint, then=()):
    """Initializes, restores with the `kind` saver, runs `then`; returns the values after."""
    saver = _saver(kind)
    init = [tf.compat.v1.global_variables_initializer(), tf.compat.v1.local_variables_initializer()]
    with tf.compat.v1.Session() as session:
        session.run(init)
        saver.restore(session, checkpoint)
        restored = session.run(variables)
        session.run(then)
        return restored, session.run(variables)


def _expected_restored(kind):
    """The names a `kind` checkpoint carries: the default Saver skips local variables."""
    return [n for n, (c, _, _) in CONTRIB_VARIABLES.items() if kind == "full" or c == GLOBAL]


def test_library_makes_contrib_names_dtypes_shapes_and_collections(world):
    with tf.Graph().as_default():
        variables, _ = _build_library_graph()
        made = {
            name: (collection, variables[name].dtype.base_dtype, variables[name].shape.as_list())
            for name, collection in _collections().items()
        }
        assert all(is_resource(v) == (world == "tf2") for v in variables.values())
    assert made == CONTRIB_VARIABLES


@pytest.mark.parametrize("kind", ["default", "full"])
def test_contrib_checkpoint_restores_into_library_graph(world, kind, tmp_path):
    with _tf1_mode(), tf.Graph().as_default():
        checkpoint = _write(_build_contrib_graph(), kind, str(tmp_path / "contrib"))
    stored = {name for name, _ in tf.train.list_variables(checkpoint)}
    assert stored == set(_expected_restored(kind))

    with tf.Graph().as_default():
        variables, opt = _build_library_graph()
        # Then what the session-run hook does on a (re)start: copies and local centres <- x~.
        restored, started = _restore(variables, kind, checkpoint, then=opt.get_init_op(0))
    for name in _expected_restored(kind):
        np.testing.assert_array_equal(restored[name], _value(name), err_msg=name)
    for name in SHAPES:
        centre = _value(f"{GLOBAL_VARIABLE_NAME}/{name}")
        np.testing.assert_array_equal(started[name], centre)
        np.testing.assert_array_equal(started[f"{LOCAL_VARIABLE_NAME}/{name}"], centre)


@pytest.mark.parametrize("kind", ["default", "full"])
def test_library_checkpoint_restores_into_contrib_graph(world, kind, tmp_path):
    with tf.Graph().as_default():
        variables, _ = _build_library_graph()
        checkpoint = _write(variables, kind, str(tmp_path / "library"))
    stored = {name for name, _ in tf.train.list_variables(checkpoint)}
    assert stored == set(_expected_restored(kind))

    with _tf1_mode(), tf.Graph().as_default():
        variables = _build_contrib_graph()
        assert not any(is_resource(v) for v in variables.values())  # Really TF1's variables.
        restored, _ = _restore(variables, kind, checkpoint)
    for name in _expected_restored(kind):
        np.testing.assert_array_equal(restored[name], _value(name), err_msg=name)
