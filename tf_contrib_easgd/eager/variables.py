"""Which variables an eager worker averages: checked, found, unwrapped and named.

`Averaged` takes what a user passes `ElasticAverageWorker`: a list of variables (checked at
once), or a `tf.Module` or Keras model (its variables are made when it is built, so they
are read when the worker starts). `tf_variable` finds the `tf.Variable` behind a Keras 3
variable, and `centre_specs` names each centre by position, so that every worker names
them alike.
"""

import re

import tensorflow as tf

from tf_contrib_easgd.eager.centre_link import CentreSpec

_INVALID_NAME_CHARACTERS = re.compile(r"[^A-Za-z0-9_.\-/]")


class NotBuiltError(ValueError):
    """A module or model has no floating-point variables yet: it makes them when built."""


class Averaged:
    """The variables of one worker that get a centre, from the `variables` argument."""

    def __init__(self, variables):
        """Checks `variables`: a list is checked whole, a module or model by its type.

        Args:
            variables: a list or tuple of floating-point variables (`tf.Variable`s or Keras
                variables, e.g. `model.trainable_variables + [extra]`), a `tf.Module`, or a
                Keras model or layer.

        Raises:
            TypeError: if `variables` is none of those, or an item is not a variable.
            ValueError: if the list is empty or holds a variable that is not floating-point.
        """
        self._list = None
        self._owner = None
        if isinstance(variables, list | tuple):
            self._list = _checked_list(variables)
        elif isinstance(variables, tf.Module) or _is_keras_layer(variables):
            self._owner = variables
        else:
            raise TypeError(
                "variables must be a list of tf.Variables (e.g. model.trainable_variables), a "
                f"tf.Module or a Keras model, got {variables!r} of type "
                f"{type(variables).__name__}."
            )

    @property
    def owner(self):
        """The `tf.Module` or Keras model given, or None for a list."""
        return self._owner

    def collect(self):
        """The variables as given, each once: a list's, or every floating-point variable of
        the module or model (its trainable ones and statistics such as batch
        normalization's; an optimizer's state is not the model's).

        Raises:
            NotBuiltError: a `ValueError`, if the module or model has no floating-point
                variable yet.
        """
        if self._list is not None:
            return list(self._list)
        found = _once(v for v in _owned(self._owner) if tf.as_dtype(v.dtype).is_floating)
        if not found:
            name = getattr(self._owner, "name", None) or type(self._owner).__name__
            raise NotBuiltError(
                f"{name!r} has no floating-point variables yet to average: its layers make "
                "them when it is first built or called. Build it before the worker starts "
                "(give a Keras model an Input, call model.build(input_shape), or call the "
                "model once on a batch), or pass the variables as a list."
            )
        return found


def tf_variable(variable):
    """The `tf.Variable` that holds `variable`: itself, or the one a Keras 3 variable wraps
    (its `value` on the TensorFlow backend); else `variable` itself. Reads and updates go to
    it directly: Keras 3's own `assign_sub` reads, subtracts and assigns the whole variable
    again."""
    if isinstance(variable, tf.Variable):
        return variable
    value = getattr(variable, "value", None)
    return value if isinstance(value, tf.Variable) else variable


def centre_specs(variables):
    """A `CentreSpec` per variable, named by its position and short name ("weight_03_kernel").

    Not by its path: Keras numbers unnamed layers and models per process ("dense",
    "dense_1", ...), so a worker that built another model first would give the same weight
    another path than the chief's, and wait for centres nobody makes. Workers train the
    same architecture, so positions agree.
    """
    width = len(str(len(variables) - 1))
    specs = []
    for index, variable in enumerate(variables):
        path = getattr(variable, "path", None) or variable.name.split(":")[0]
        short = _INVALID_NAME_CHARACTERS.sub("_", path.rsplit("/", 1)[-1])
        name = f"weight_{index:0{width}d}_{short}"
        specs.append(CentreSpec(name, tuple(variable.shape), tf.as_dtype(variable.dtype)))
    return specs


def _checked_list(variables):
    if not variables:
        raise ValueError(
            "variables is empty: pass the variables to average, e.g. "
            "model.trainable_variables (after the model is built) or a tf.Module."
        )
    for index, variable in enumerate(variables):
        if not isinstance(tf_variable(variable), tf.Variable):
            raise TypeError(
                f"variables[{index}] must be a tf.Variable or a Keras variable, got "
                f"{variable!r} of type {type(variable).__name__}."
            )
        dtype = tf.as_dtype(variable.dtype)
        if not dtype.is_floating:
            raise ValueError(
                f"variables[{index}] ({variable.name!r}) is {dtype.name}: only "
                "floating-point variables have a centre (an elastic move of a counter or an "
                "index means nothing); leave it out of variables."
            )
    return _once(variables)


def _once(variables):
    seen, once = set(), []
    for variable in variables:
        if id(tf_variable(variable)) not in seen:
            seen.add(id(tf_variable(variable)))
            once.append(variable)
    return once


def _is_keras_layer(value):
    """Whether `value` is a Keras layer or model (Keras 3's are no `tf.Module`s)."""
    return any(
        cls.__name__ == "Layer" and cls.__module__.split(".")[0] in ("keras", "tf_keras")
        for cls in type(value).__mro__
    )


def _owned(owner):
    """Every variable of a module or model, in its order."""
    if _is_keras_layer(owner):
        try:
            return list(owner.weights)
        except ValueError:  # Keras 2's "Weights for model ... have not yet been created".
            return []
    return list(owner.variables)
