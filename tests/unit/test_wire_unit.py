"""Unit tests (no server, no child process): the 16-bit wire (`wire_dtype`).

The tests of its other tiers are in tests/cluster/test_wire.py.
"""

import numpy as np
import pytest
import tensorflow as tf
from exchange_graphs import wire_references as _references

from tf_contrib_easgd import ElasticAverageCustomGetter, ElasticAverageOptimizer
from tf_contrib_easgd.exchange.wire import check_wire_dtype


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, None), (tf.float32, None), ("float32", None), (tf.bfloat16, tf.bfloat16),
     ("bfloat16", tf.bfloat16), (tf.float16, tf.float16), ("float16", tf.float16)],
)  # fmt: skip
def test_wire_dtypes_accepted(value, expected):
    assert check_wire_dtype(value) == expected


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (tf.int8, ValueError, r"wire_dtype must be one of .*int8"),
        ("float8", ValueError, r"wire_dtype must be one of .*'float8'"),
        (16, TypeError, r"wire_dtype must be None, a tf.DType or a dtype's name, got 16"),
        (np.float16, TypeError, r"wire_dtype must be .*float16"),
    ],
)
def test_a_bad_wire_dtype_is_refused_before_anything_is_built(value, error, message):
    getter = ElasticAverageCustomGetter("")
    with tf.Graph().as_default() as graph:
        with pytest.raises(error, match=message):
            ElasticAverageOptimizer(
                tf.compat.v1.train.GradientDescentOptimizer(0.1), 1, getter, wire_dtype=value
            )
        assert not graph.get_operations()


def test_a_wire_needs_no_reference_without_a_remote_centre(world):
    # No ps: every centre is on the worker's own device, exchanged in place at full width.
    getter = ElasticAverageCustomGetter("")
    with tf.Graph().as_default():
        with tf.compat.v1.variable_scope("", custom_getter=getter):
            w = tf.compat.v1.get_variable("w", initializer=tf.constant(8.0))
        opt = ElasticAverageOptimizer(
            tf.compat.v1.train.GradientDescentOptimizer(0.5), 1, getter,
            communication_period=1, moving_rate=0.5, rho=0.0, wire_dtype="bfloat16",
        )  # fmt: skip
        train_op = opt.minimize(0.5 * tf.square(w))
        assert not _references()
        assert opt.wire_dtype == tf.bfloat16
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(tf.compat.v1.local_variables_initializer())
            session.run(opt.get_init_op(0))
            session.run(train_op)
            # w = 8 -> 4; d = 0.5 (4 - 8) = -2: w = 6, centre = 6.
            assert session.run([w, getter.find(w).global_center]) == [6.0, 6.0]
