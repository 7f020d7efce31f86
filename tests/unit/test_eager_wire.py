"""The 16-bit wire of ElasticAverageWorker and ElasticAverageCallback (`wire_dtype`).

The same semantics as the optimizer's wire (tests/cluster/test_wire.py): the worker sends
s = wire(x - r), the ps answers e = wire(c - r), both move by d = alpha (s - e) and add e
to their copy of r. The hand-worked cases are test_wire's: a variable w = 1 that every
local step moves by g = 0.12548828125 = 2^-3 * (1 + 2^-8), a difference that bfloat16 (8
significant bits) cannot hold and float16 (11 bits) can. The worker is eager only, so
there is one variable world here (the link's graph has resource variables).
"""

import numpy as np
import pytest
import tensorflow as tf

from tf_contrib_easgd import ElasticAverageWorker, cluster_from_hosts
from tf_contrib_easgd.keras import ElasticAverageCallback

PS, W0, W1 = "localhost:2222", "localhost:2223", "localhost:2224"


WORKER = cluster_from_hosts("worker", 0, PS, f"{W0},{W1}")


@pytest.mark.parametrize("make", [ElasticAverageWorker, ElasticAverageCallback])
@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (tf.int8, ValueError, r"wire_dtype must be one of .*; got tf.int8"),
        ("float8", ValueError, r"wire_dtype must be one of .*; got 'float8'"),
        (16, TypeError, r"wire_dtype must be None, a tf.DType or a dtype's name, got 16 of"),
        (np.float16, TypeError, r"wire_dtype must be None, .* got <class 'numpy.float16'>"),
    ],
)
def test_a_bad_wire_dtype_is_refused_at_construction(make, value, error, message):
    arguments = {"variables": [tf.Variable(1.0)]} if make is ElasticAverageWorker else {}
    with pytest.raises(error, match=message):
        make(WORKER, **arguments, wire_dtype=value)


@pytest.mark.parametrize("make", [ElasticAverageWorker, ElasticAverageCallback])
@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, None), (tf.float32, None), ("float32", None), (tf.bfloat16, tf.bfloat16),
     ("bfloat16", tf.bfloat16), (tf.float16, tf.float16), ("float16", tf.float16)],
)  # fmt: skip
def test_wire_dtypes_accepted(make, value, expected):
    arguments = {"variables": [tf.Variable(1.0)]} if make is ElasticAverageWorker else {}
    assert make(WORKER, **arguments, wire_dtype=value).wire_dtype == expected
    assert make(WORKER, **arguments).wire_dtype is None  # The default: float32 values.
