"""Variables made without `get_variable` (Keras layers, `tf.Variable`), given to the getter.

Inside `ElasticAverageCustomGetter.variable_creator_scope()`, TensorFlow hands every variable
creation to the getter's variable creator. A `Creation` presents one such creation as a
`get_variable` call (a name, getter arguments, a next getter), so that the getter makes the
worker copy and the two centres by the code it runs for `get_variable`. docs/DESIGN.md
("Keras layers").
"""

import tensorflow as tf

_LOCAL = tf.compat.v1.GraphKeys.LOCAL_VARIABLES
_GLOBAL = tf.compat.v1.GraphKeys.GLOBAL_VARIABLES

#: The arguments of a variable creator that a custom getter also takes, under one name.
_SHARED_ARGUMENTS = ("trainable", "collections", "synchronization", "aggregation")


def is_trainable(kwargs):
    """Whether `get_variable` or a variable creator makes a trainable variable of `kwargs`.

    `trainable=None` means trainable, unless the variable is synchronised on read, as
    TensorFlow decides it.
    """
    trainable = kwargs.get("trainable")
    if trainable is None:
        return kwargs.get("synchronization") != tf.VariableSynchronization.ON_READ
    return bool(trainable)


def is_new_trainable(kwargs):
    """Whether a creator's `kwargs` make a new trainable variable (not one restored from a
    `VariableDef`, which exists already)."""
    return kwargs.get("variable_def") is None and is_trainable(kwargs)


def pass_through(next_creator, kwargs, worker_device):
    """Makes a variable the getter leaves alone, placing a local one on the worker, as the
    getter does for `get_variable`."""
    if _LOCAL in (kwargs.get("collections") or []):
        with tf.compat.v1.device(worker_device):
            return next_creator(**kwargs)
    return next_creator(**kwargs)


class Creation:
    """One variable creation seen by the creator, as the getter's `get_variable` call.

    Attributes:
        name: the full name the variable would have had, e.g. `dense/kernel` for the
            `kernel` of a Keras layer built in the name scope `dense`.
        getter_kwargs: the getter arguments that matter to it (trainability, collections,
            synchronization and aggregation).
    """

    def __init__(self, next_creator, kwargs):
        """Takes a creation.

        Args:
            next_creator: the next creator of TensorFlow's stack.
            kwargs: the creator's arguments (`initial_value`, `name`, `trainable`, ...).
        """
        self._next_creator = next_creator
        self._kwargs = dict(kwargs, initial_value=_computed_once(kwargs.get("initial_value")))
        graph = tf.compat.v1.get_default_graph()
        # The name the variable's own op would take in the current name scope.
        self.name = graph.unique_name(kwargs.get("name") or "Variable", mark_as_used=False)
        self.getter_kwargs = {key: kwargs.get(key) for key in _SHARED_ARGUMENTS}

    def getter(self, name, **getter_kwargs):
        """The next getter of the getter's chain: makes variable `name` with the creation's
        value, shape, dtype and constraint, and the getter's collections and trainability.

        Args:
            name: the full name of the variable to make (the worker copy's, or a centre's).
            **getter_kwargs: what the getter passes on; all but `trainable` and
                `collections` (a get_variable's `reuse`, the centres' dropped `regularizer`)
                concern `get_variable` only.
        """
        kwargs = dict(
            self._kwargs,
            name=name,
            trainable=getter_kwargs["trainable"],
            collections=getter_kwargs["collections"],
        )
        with tf.compat.v1.name_scope(None):  # `name` is a full name, as get_variable's are.
            variable = self._next_creator(**kwargs)
        if "collections" not in self._kwargs:
            # A TF 2 `tf.Variable` (Keras 3's) takes no collections: it is put in
            # GLOBAL_VARIABLES. Moved where the getter asks, as a TF1 variable would be.
            _keep_in(variable, _GLOBAL, _GLOBAL in kwargs["collections"])
            _keep_in(variable, _LOCAL, _LOCAL in kwargs["collections"])
        return variable


def _computed_once(initial_value):
    """The initial value, a callable that computes it once and returns it every time.

    The worker copy and the two centres start from one value, as the init op would make
    them anyway, and an unseeded Keras initializer is not called three times (tf-keras
    warns when it is).
    """
    if not callable(initial_value):
        return initial_value
    computed = []

    def value():
        if not computed:
            computed.append(initial_value())
        return computed[0]

    return value


def _keep_in(variable, key, wanted):
    """Puts `variable` in, or takes it out of, graph collection `key`."""
    members = tf.compat.v1.get_collection_ref(key)
    present = any(member is variable for member in members)
    if wanted and not present:
        members.append(variable)
    elif present and not wanted:
        members[:] = [member for member in members if member is not variable]
