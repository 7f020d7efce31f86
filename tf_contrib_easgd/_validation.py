"""Argument checks shared by the public classes: fail early, name the argument and value."""

import math
import numbers

import tensorflow as tf


def check_graph_mode(what):
    """Raises if eager execution is on: the library builds TF1 graphs only.

    Args:
        what: the name of the class or function being constructed, for the message.

    Raises:
        ValueError: if eager execution is enabled.
    """
    if tf.executing_eagerly():
        raise ValueError(
            f"{what} works in graph mode only, but eager execution is enabled. Build the "
            "model inside `with tf.Graph().as_default():`, or call "
            "tf.compat.v1.disable_eager_execution() (or tf.compat.v1.disable_v2_behavior() "
            "for TF1 semantics) at program start."
        )


def check_int(value, name, minimum):
    """Checks that `value` is an int (not a bool) of at least `minimum`.

    Raises:
        TypeError: if `value` is not an integer.
        ValueError: if `value < minimum`.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {value!r} of type {type(value).__name__}.")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}.")
    return int(value)


def check_index(value, name, size):
    """Checks that `value` is an int in `[0, size)`.

    Raises:
        TypeError: if `value` is not an integer.
        ValueError: if `value` is outside `[0, size)`.
    """
    check_int(value, name, 0)
    if value >= size:
        raise ValueError(f"{name} must be in [0, {size}), got {value!r}.")
    return int(value)


def check_number(value, name, *, low, high=None, low_inclusive=False):
    """Checks that `value` is a real number in the interval given, or None.

    Args:
        value: the value to check; None is accepted and returned.
        name: argument name for the message.
        low: the lower bound.
        high: the inclusive upper bound, or None for no bound.
        low_inclusive: whether `low` itself is allowed.

    Raises:
        TypeError: if `value` is not a real number.
        ValueError: if `value` is outside the interval.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {value!r} of type {type(value).__name__}.")
    too_low = value < low if low_inclusive else value <= low
    if too_low or (high is not None and value > high) or math.isnan(value):
        interval = ("[" if low_inclusive else "(") + f"{low}, " + (f"{high}]" if high else "inf)")
        raise ValueError(f"{name} must be in {interval}, got {value!r}.")
    return float(value)


def check_bool(value, name):
    """Checks that `value` is a bool.

    Raises:
        TypeError: if `value` is not a bool.
    """
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {value!r} of type {type(value).__name__}.")
    return value


def check_device(value, name):
    """Checks that `value` is a parsable device string.

    Raises:
        TypeError: if `value` is not a string.
        ValueError: if `value` is not a device specification.
    """
    if not isinstance(value, str):
        raise TypeError(
            f"{name} must be a device string such as '/job:worker/task:0', got {value!r} of "
            f"type {type(value).__name__}."
        )
    try:
        tf.DeviceSpec.from_string(value)
    except ValueError as error:
        raise ValueError(f"{name} is not a device specification: {value!r} ({error}).") from None
    return value


def check_instance(value, cls, name):
    """Checks that `value` is an instance of `cls` (named with "an", as vowels start ours).

    Raises:
        TypeError: if it is not.
    """
    if not isinstance(value, cls):
        raise TypeError(
            f"{name} must be an {cls.__name__}, got {value!r} of type {type(value).__name__}."
        )
    return value


def check_wrapped_optimizer(opt):
    """Checks that `opt`, the optimizer an EASGD optimizer wraps, is a v1 optimizer.

    Raises:
        TypeError: if `opt` is not a `tf.compat.v1.train.Optimizer` (e.g. a Keras one).
    """
    if not isinstance(opt, tf.compat.v1.train.Optimizer):
        raise TypeError(
            "opt must be a tf.compat.v1.train.Optimizer (e.g. "
            "tf.compat.v1.train.GradientDescentOptimizer); Keras optimizers are not "
            f"supported. Got {opt!r} of type {type(opt).__name__}."
        )
    return opt


def check_name(value, name):
    """Checks that `value` is a non-empty string.

    Raises:
        ValueError: if it is not.
    """
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name} must be a non-empty string, got {value!r}.")
    return value
