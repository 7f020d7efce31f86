"""Bad arguments raise TypeError/ValueError naming argument and value, before building anything.

Contrib let them surface as KeyError/NameError/AttributeError deep inside TF (contrib fix 8).
"""

import pytest
import tensorflow as tf

from tf_contrib_easgd import ElasticAverageCustomGetter, ElasticAverageOptimizer


def _sgd():
    return tf.compat.v1.train.GradientDescentOptimizer(0.1)


class _NoRateOptimizer(tf.compat.v1.train.Optimizer):
    """A v1 optimizer that keeps no learning rate."""

    def __init__(self):
        super().__init__(False, "NoRate")


# Each case: keyword arguments that override a valid construction, the error, and a pattern
# naming the argument and the value received.
_CONSTRUCTION_CASES = {
    "keras optimizer": (
        {"opt": "keras"},
        TypeError,
        r"opt must be a tf.compat.v1.train.Optimizer.*Keras.*type SGD",
    ),
    "opt is a string": ({"opt": "sgd"}, TypeError, r"opt must be .*'sgd' of type str"),
    "getter is a function": (
        {"ea_custom_getter": "function"},
        TypeError,
        r"ea_custom_getter must be an ElasticAverageCustomGetter, got <function",
    ),
    "num_worker 0": ({"num_worker": 0}, ValueError, r"num_worker must be >= 1, got 0"),
    "num_worker float": ({"num_worker": 2.0}, TypeError, r"num_worker must be an int, got 2.0"),
    "num_worker bool": ({"num_worker": True}, TypeError, r"num_worker must be an int, got True"),
    "period 0": (
        {"communication_period": 0},
        ValueError,
        r"communication_period must be >= 1, got 0",
    ),
    "period string": (
        {"communication_period": "10"},
        TypeError,
        r"communication_period must be an int, got '10'",
    ),
    "moving_rate 0": ({"moving_rate": 0.0}, ValueError, r"moving_rate must be in \(0.0, 1.0\]"),
    "moving_rate above 1": ({"moving_rate": 1.5}, ValueError, r"moving_rate .*got 1.5"),
    "moving_rate negative": ({"moving_rate": -0.1}, ValueError, r"moving_rate .*got -0.1"),
    "moving_rate nan": ({"moving_rate": float("nan")}, ValueError, r"moving_rate .*got nan"),
    "moving_rate tensor": ({"moving_rate": "0.1"}, TypeError, r"moving_rate must be a number"),
    "rho negative": ({"rho": -0.5}, ValueError, r"rho must be in \[0.0, inf\), got -0.5"),
    "use_locking string": (
        {"use_locking": "yes"},
        TypeError,
        r"use_locking must be a bool, got 'yes'",
    ),
    "synchronous int": ({"synchronous": 1}, TypeError, r"synchronous must be a bool, got 1"),
    "empty name": ({"name": ""}, ValueError, r"name must be a non-empty string, got ''"),
    "no learning rate": (
        {"opt": "norate"},
        ValueError,
        r"no learning rate .*Pass rho explicitly",
    ),
    "zero learning rate": (
        {"opt": "zerorate"},
        ValueError,
        r"learning rate of opt is 0.0; pass rho",
    ),
}


def _resolve(value, getter):
    if value == "keras":
        return tf.keras.optimizers.SGD(0.1)
    if value == "function":
        return lambda getter_, name, **kwargs: getter_(name, **kwargs)
    if value == "norate":
        return _NoRateOptimizer()
    if value == "zerorate":
        return tf.compat.v1.train.GradientDescentOptimizer(0.0)
    return value


@pytest.mark.parametrize("case", sorted(_CONSTRUCTION_CASES))
def test_construction_errors(world, case):
    overrides, error, pattern = _CONSTRUCTION_CASES[case]
    graph = tf.Graph()
    with graph.as_default():
        getter = ElasticAverageCustomGetter("")
        kwargs = {"opt": _sgd(), "num_worker": 2, "ea_custom_getter": getter}
        kwargs.update({key: _resolve(value, getter) for key, value in overrides.items()})
        built = len(graph.get_operations())
        with pytest.raises(error, match=pattern):
            ElasticAverageOptimizer(**kwargs)
        assert len(graph.get_operations()) == built  # Nothing half-built.


def test_no_learning_rate_is_fine_with_an_explicit_rho(world):
    with tf.Graph().as_default():
        opt = ElasticAverageOptimizer(_NoRateOptimizer(), 1, ElasticAverageCustomGetter(""), rho=0)
    assert opt.get_name() == "ElasticAverageOptimizer"


def test_eager_mode_says_how_to_enter_graph_mode():
    assert tf.executing_eagerly()
    with pytest.raises(ValueError, match=r"graph mode only.*tf.Graph\(\).as_default\(\)"):
        ElasticAverageOptimizer(_sgd(), 1, ElasticAverageCustomGetter(""))


def _model(getter):
    with tf.compat.v1.variable_scope("", custom_getter=getter):
        w = tf.compat.v1.get_variable("w", [2])
    return w, ElasticAverageOptimizer(_sgd(), 2, getter)


@pytest.mark.parametrize(
    ("task_index", "error", "pattern"),
    [
        (2, ValueError, r"task_index must be in \[0, 2\), got 2"),
        (-1, ValueError, r"task_index must be >= 0, got -1"),
        ("0", TypeError, r"task_index must be an int, got '0'"),
    ],
)
@pytest.mark.parametrize("method", ["get_init_op", "make_session_run_hook"])
def test_task_index_outside_the_workers(world, method, task_index, error, pattern):
    with tf.Graph().as_default():
        _, opt = _model(ElasticAverageCustomGetter(""))
        with pytest.raises(error, match=pattern):
            if method == "get_init_op":
                opt.get_init_op(task_index)
            else:
                opt.make_session_run_hook(True, task_index)


def test_is_chief_must_be_a_bool(world):
    with tf.Graph().as_default():
        _, opt = _model(ElasticAverageCustomGetter(""))
        with pytest.raises(TypeError, match=r"is_chief must be a bool, got 'yes'"):
            opt.make_session_run_hook("yes", 0)


def test_variable_not_made_through_the_getter(world):
    with tf.Graph().as_default():
        w, opt = _model(ElasticAverageCustomGetter(""))
        stray = tf.compat.v1.get_variable("stray", [2])
        with pytest.raises(ValueError, match=r"'stray:0' was not created through"):
            opt.minimize(tf.reduce_sum(w) + tf.reduce_sum(stray))
        with pytest.raises(ValueError, match=r"'stray:0' was not created through"):
            opt.apply_gradients([(tf.ones([2]), stray)])


def test_apply_gradients_argument_errors(world):
    with tf.Graph().as_default():
        w, opt = _model(ElasticAverageCustomGetter(""))
        with pytest.raises(ValueError, match="grads_and_vars is empty"):
            opt.apply_gradients([])
        with pytest.raises(TypeError, match=r"global_step must be a variable or None, got 3"):
            opt.apply_gradients([(tf.ones([2]), w)], global_step=3)


@pytest.mark.parametrize("method", ["get_init_op", "swapping_saver"])
def test_calls_before_the_model_exists_say_what_to_do_first(world, method):
    with tf.Graph().as_default():
        opt = ElasticAverageOptimizer(_sgd(), 1, ElasticAverageCustomGetter(""))
        with pytest.raises(RuntimeError, match="ElasticAverageCustomGetter"):
            opt.get_init_op(0) if method == "get_init_op" else opt.swapping_saver()


def test_swapping_saver_var_list_type(world):
    with tf.Graph().as_default():
        _, opt = _model(ElasticAverageCustomGetter(""))
        with pytest.raises(TypeError, match=r"var_list must be a list, a tuple or None, got 'w'"):
            opt.swapping_saver(var_list="w")
