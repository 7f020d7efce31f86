"""The custom getter that gives every trainable variable a worker copy and two centres."""

import contextlib
import dataclasses
import threading

import tensorflow as tf

from tf_contrib_easgd import _validation, variable_creator
from tf_contrib_easgd.centre_map import CentreMap

LOCAL_VARIABLE_NAME = "local_center_variable"
GLOBAL_VARIABLE_NAME = "global_center_variable"
GLOBAL_STEP = "global_step"

_LOCAL = tf.compat.v1.GraphKeys.LOCAL_VARIABLES
_GLOBAL = tf.compat.v1.GraphKeys.GLOBAL_VARIABLES
_TRAINABLE = tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES

# The order in which `tf.compat.v1.get_variable` hands its arguments to a getter. TF itself
# passes them by keyword, but a user's chained getter may pass them by position; naming them
# here lets the getter treat both forms alike (contrib took some of them twice, contrib fix 4).
_GETTER_ARGUMENTS = (
    "shape",
    "dtype",
    "initializer",
    "regularizer",
    "reuse",
    "trainable",
    "collections",
    "caching_device",
    "partitioner",
    "validate_shape",
    "use_resource",
    "constraint",
    "synchronization",
    "aggregation",
)


@dataclasses.dataclass(frozen=True)
class CenteredVariable:
    """One trainable (partition of a) variable with the two centres made for it.

    Attributes:
        worker: the worker's own copy x_i, trained by the wrapped optimizer.
        local_center: the last value of the global centre this worker read.
        global_center: the centre x~ shared by all workers (on a parameter server).
    """

    worker: tf.Variable
    local_center: tf.Variable
    global_center: tf.Variable


class ElasticAverageCustomGetter:
    """Creates the worker copy, the local centre and the global centre of each variable.

    Use it as the `custom_getter` of a `tf.compat.v1.variable_scope`, inside a
    `tf.compat.v1.train.replica_device_setter` device scope, and create variables with
    `tf.compat.v1.get_variable`. For a trainable variable `NAME` it makes:

    * `NAME` on `worker_device`, in LOCAL_VARIABLES and TRAINABLE_VARIABLES (returned);
    * `global_center_variable/NAME` where the enclosing device function puts variables
      (a parameter server), in GLOBAL_VARIABLES, not trainable;
    * `local_center_variable/NAME` on `worker_device`, in LOCAL_VARIABLES, not trainable.

    Partitioned variables are handled partition by partition. Getting a variable again
    with `reuse=True` or `tf.compat.v1.AUTO_REUSE` returns the existing worker copy and
    makes no second centre. Non-trainable variables pass through unchanged, except that
    those in LOCAL_VARIABLES are placed on `worker_device`.

    Keras layers and `tf.Variable` make their variables without calling a custom getter;
    built inside `with getter.variable_creator_scope():` theirs get the same treatment.

    `find(variable)` and `centered_variables()` are the public way to reach the centres.
    For code written against contrib, `_local_map` and `_global_map` give contrib's
    read-only view of them (see `CentreMap`).

    Example:

    ```python
    getter = ElasticAverageCustomGetter(worker_device="/job:worker/task:0")
    with tf.compat.v1.device(tf.compat.v1.train.replica_device_setter(
            worker_device="/job:worker/task:0", cluster=cluster)), \\
         tf.compat.v1.variable_scope("", custom_getter=getter):
        w = tf.compat.v1.get_variable("w", [784, 10])
    ```
    """

    def __init__(self, worker_device):
        """Creates the getter.

        Args:
            worker_device: device string of this worker, e.g. `"/job:worker/task:0"`.

        Raises:
            TypeError: if `worker_device` is not a string.
            ValueError: if `worker_device` is not a valid device specification.
        """
        _validation.check_device(worker_device, "worker_device")
        self._worker_device = worker_device
        self._by_name = {}  # name of a worker copy (or partition) -> CenteredVariable
        self._making = threading.local()  # `.depth` > 0 while this thread makes variables.
        self._saveables = {}  # original variable name -> global centre (or its partitions)
        # Contrib's two maps, as live read-only views (the optimizer returns the same ones).
        self._centre_maps = (
            CentreMap(self._by_name, "local_center", "_local_map"),
            CentreMap(self._by_name, "global_center", "_global_map"),
        )

    @property
    def worker_device(self):
        """The device string the worker copies and local centres live on."""
        return self._worker_device

    @property
    def _local_map(self):
        """Contrib compatibility: a read-only `CentreMap` from each worker copy to its local
        centre (`find(v).local_center`); prefer `find()`."""
        return self._centre_maps[0]

    @property
    def _global_map(self):
        """Contrib compatibility: a read-only `CentreMap` from each worker copy to its global
        centre (`find(v).global_center`); prefer `find()`."""
        return self._centre_maps[1]

    def __call__(self, getter, name, *args, **kwargs):
        """Gets or creates the variable `name`; called by `tf.compat.v1.get_variable`.

        Args:
            getter: the next getter in the chain.
            name: full name of the variable.
            *args: the remaining `get_variable` arguments, by position.
            **kwargs: the remaining `get_variable` arguments, by keyword.

        Returns:
            The worker copy for trainable variables; otherwise what `getter` returns.

        Raises:
            TypeError: if an argument is given both by position and by keyword.
        """
        kwargs = _as_keywords(args, kwargs)
        with self._making_variables():
            return self._get_or_create(getter, name, kwargs)

    def variable_creator_scope(self):
        """Returns a context in which variables made without `get_variable` get centres too.

        `tf.compat.v1.get_variable` calls the getter; Keras layers and models (tf-keras's,
        Keras 3's) and `tf.Variable` / `tf.compat.v1.Variable` do not, so on their own
        their variables stay single copies where the device function puts them (contrib
        never averaged them). Inside this context every trainable variable made by other
        means than the getter goes through the getter's own code as if `get_variable` had
        made it: a worker copy named as the variable would have been (e.g. `dense/kernel`),
        returned to its maker, and the two centres `global_center_variable/dense/kernel`
        and `local_center_variable/dense/kernel`, with the same devices and collections.
        Non-trainable variables pass through as the getter passes them. The context is
        TensorFlow's `tf.compat.v1.variable_creator_scope` on the default graph, so it
        holds in this graph and thread; enter it where the model is built, typically
        beside the getter's `variable_scope` (docs/DESIGN.md, "Keras layers"):

        ```python
        with tf.compat.v1.device(device_setter), \\
             tf.compat.v1.variable_scope("", custom_getter=getter), \\
             getter.variable_creator_scope():
            logits = tf.keras.layers.Dense(10)(images)
        ```

        Raises:
            ValueError: if eager execution is enabled (the getter builds graphs only).
        """
        _validation.check_graph_mode(f"{type(self).__name__}.variable_creator_scope()")
        return tf.compat.v1.variable_creator_scope(self._create_variable)

    def _create_variable(self, next_creator, **kwargs):
        """The variable creator of `variable_creator_scope`: see there."""
        if self._is_making_variables() or not variable_creator.is_new_trainable(kwargs):
            return variable_creator.pass_through(next_creator, kwargs, self._worker_device)
        creation = variable_creator.Creation(next_creator, kwargs)
        with self._making_variables():
            return self._get_or_create(creation.getter, creation.name, creation.getter_kwargs)

    def _get_or_create(self, getter, name, kwargs):
        """The getter's work on keyword arguments (see `__call__`)."""
        collections = list(kwargs.get("collections") or [_GLOBAL])
        if not variable_creator.is_trainable(kwargs):
            if _LOCAL in collections:
                with tf.compat.v1.device(self._worker_device):
                    return getter(name, **kwargs)
            return getter(name, **kwargs)

        worker_collections = [c for c in collections if c not in (_GLOBAL, _LOCAL)]
        with tf.compat.v1.device(self._worker_device):
            worker = getter(
                name, **dict(kwargs, trainable=True, collections=[_LOCAL, *worker_collections])
            )
        if partitions(worker)[0].name in self._by_name:
            return worker  # Reused: its centres exist already.

        centre_kwargs = dict(kwargs, trainable=False, reuse=tf.compat.v1.AUTO_REUSE)
        centre_kwargs.pop("regularizer", None)  # The penalty belongs to the worker copy only.
        global_center = getter(
            f"{GLOBAL_VARIABLE_NAME}/{name}", **dict(centre_kwargs, collections=[_GLOBAL])
        )
        with tf.compat.v1.device(self._worker_device):
            local_center = getter(
                f"{LOCAL_VARIABLE_NAME}/{name}", **dict(centre_kwargs, collections=[_LOCAL])
            )
        for parts in zip(
            partitions(worker), partitions(local_center), partitions(global_center), strict=True
        ):
            self._by_name[parts[0].name] = CenteredVariable(*parts)
        self._saveables[name] = global_center
        return worker

    def _is_making_variables(self):
        """Whether this thread is inside the getter's own making of variables."""
        return getattr(self._making, "depth", 0) > 0

    @contextlib.contextmanager
    def _making_variables(self):
        """Marks this thread as making variables: the creator lets those pass."""
        self._making.depth = getattr(self._making, "depth", 0) + 1
        try:
            yield
        finally:
            self._making.depth -= 1

    def centered_variables(self):
        """Returns a `CenteredVariable` per worker copy (or partition), in creation order."""
        return list(self._by_name.values())

    def find(self, variable):
        """Returns the `CenteredVariable` of `variable`, a worker copy made by this getter.

        Args:
            variable: a worker copy (or one partition of one).

        Raises:
            ValueError: if `variable` was not created through this getter.
        """
        entry = self._by_name.get(getattr(variable, "name", None))
        if entry is None or entry.worker is not variable:
            raise ValueError(
                f"Variable {getattr(variable, 'name', variable)!r} was not created through "
                "this ElasticAverageCustomGetter, so it has no centre. "
                "tf.compat.v1.get_variable inside tf.compat.v1.variable_scope(..., "
                "custom_getter=<the getter>) calls the getter; Keras layers and tf.Variable "
                "do not: build them inside `with getter.variable_creator_scope():` too, in "
                "the graph and thread where they are made."
            )
        return entry

    def global_centers_by_name(self):
        """Maps each original variable name to its global centre (a list for partitions)."""
        return {name: partitions(centre) for name, centre in self._saveables.items()}

    def elastic_distance(self, name="elastic_distance"):
        """Returns how far this worker is from the centre: a float scalar tensor.

        The Euclidean norm of `x - global_centre` over every variable made through the
        getter so far (all partitions), computed on the worker device: sqrt of the sum of
        the squared differences. It is 0 right after the worker copied the centre; with
        asynchronous EASGD it grows with the worker's local steps and shrinks at its
        exchanges. Evaluating it reads the whole centre from the parameter servers (one
        model's worth of bytes), so log it every few hundred steps, not every step, e.g. as
        `tf.compat.v1.summary.scalar("elastic_distance", distance)`.

        Args:
            name: the name of the tensor.

        Raises:
            ValueError: if no variable was made through the getter yet.
        """
        entries = self.centered_variables()
        if not entries:
            raise ValueError(
                "elastic_distance() needs the model: build it inside "
                "variable_scope(..., custom_getter=<this getter>) first."
            )
        with tf.compat.v1.device(self._worker_device):
            with tf.name_scope(f"{name}_terms"):
                squares = [
                    tf.reduce_sum(tf.square(tf.cast(e.worker - e.global_center, tf.float32)))
                    for e in entries
                ]
            return tf.sqrt(tf.add_n(squares), name=name)


def partitions(variable):
    """Returns the partitions of a partitioned variable, or `[variable]` for any other item.

    TF 2 no longer exports `PartitionedVariable`; it is the iterable that is not a variable.
    """
    if isinstance(variable, tf.Variable) or not hasattr(variable, "__iter__"):
        return [variable]
    return list(variable)


def flatten_partitions(variables):
    """Returns `variables` with each partitioned variable replaced by its partitions."""
    return [part for variable in variables for part in partitions(variable)]


def create_as_local_variable(next_creator, **kwargs):
    """Variable creator that puts the wrapped optimizer's variables in LOCAL_VARIABLES.

    For `tf.compat.v1.variable_creator_scope`: the optimizer builds the wrapped
    optimizer's update (its slots, e.g. Adam's "m") under it, so that they stay local
    to the worker, as the worker copies do.
    """
    collections = kwargs.get("collections") or [_GLOBAL]
    kwargs["collections"] = [_LOCAL, *(c for c in collections if c not in (_GLOBAL, _LOCAL))]
    return next_creator(**kwargs)


def _as_keywords(args, kwargs):
    """Returns the getter arguments with those given by position turned into keywords."""
    if len(args) > len(_GETTER_ARGUMENTS):
        raise TypeError(f"custom getter got {len(args)} positional arguments: {args!r}")
    merged = dict(kwargs)
    for key, value in zip(_GETTER_ARGUMENTS, args, strict=False):
        if key in merged:
            raise TypeError(f"custom getter got argument {key!r} both by position and by keyword")
        merged[key] = value
    return merged
