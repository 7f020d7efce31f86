"""Contrib's `_local_map` / `_global_map` of the custom getter: read-only, live views."""

import collections.abc


class CentreMap(collections.abc.Mapping):
    """Contrib's `_local_map` / `_global_map`: worker copy -> centre, read-only and live.

    Contrib's getter (and its optimizer, which held the same two objects) kept two plain
    dicts keyed by the worker copies it returned: `_local_map[v]` was the local centre of
    `v`, `_global_map[v]` its global centre. A partitioned variable was entered partition by
    partition: the keys are the partitions, each mapped to the same partition of the
    centre; the `PartitionedVariable` itself is no key. Getting a variable again with
    `reuse` added no key. Non-trainable variables were not entered. Code written against
    contrib (TensorFlow's own EASGD test reads `getter._global_map[v]`) finds the same here.

    Unlike a dict it never hashes a variable: TF 2 variables cannot be hashed where eager
    execution is on (outside a `tf.Graph().as_default()` block, in a `tf.function`), so
    lookups go by the variable's name and then identity, and a `variable.ref()` works as a
    key too. It is a view of the getter: variables created later appear in it. It cannot
    be changed (`map[v] = ...` is a `TypeError`), and the attributes that return it cannot
    be assigned to. New code calls `ElasticAverageCustomGetter.find(v)` instead.
    """

    def __init__(self, entries, field, name):
        """Creates the view.

        Args:
            entries: the getter's dict from a worker copy's (or partition's) name to its
                `CenteredVariable`, read on every access.
            field: "local_center" or "global_center", the `CenteredVariable` field mapped to.
            name: the attribute the view stands for, for messages ("_local_map").
        """
        self._entries = entries
        self._field = field
        self._name = name

    def _entry(self, key):
        """The `CenteredVariable` of `key` (a worker copy, or its `ref()`), or None."""
        variable = key.deref() if callable(getattr(key, "deref", None)) else key
        entry = self._entries.get(getattr(variable, "name", None))
        return entry if entry is not None and entry.worker is variable else None

    def __getitem__(self, key):
        entry = self._entry(key)
        if entry is None:
            name = getattr(key, "name", None)
            partitioned = isinstance(name, str) and any(
                known.startswith(f"{name}/part_") for known in self._entries
            )
            hint = "; a partitioned variable's keys are its partitions" if partitioned else ""
            raise KeyError(
                f"{getattr(key, 'name', key)!r} is not a worker copy made by this "
                f"ElasticAverageCustomGetter (in {self._name}){hint}"
            )
        return getattr(entry, self._field)

    def __contains__(self, key):
        return self._entry(key) is not None

    def __iter__(self):
        return iter([entry.worker for entry in self._entries.values()])

    def __len__(self):
        return len(self._entries)

    def __eq__(self, other):
        # Mapping's own __eq__ builds dicts, which would hash the variables.
        if not isinstance(other, collections.abc.Mapping):
            return NotImplemented
        return len(self) == len(other) and all(
            key in other and other[key] is value for key, value in self.items()
        )

    __hash__ = None  # Unhashable, as the dicts it stands for.

    def __repr__(self):
        pairs = ", ".join(f"{key.name!r}: {value.name!r}" for key, value in self.items())
        return f"<{type(self).__name__} {self._name} {{{pairs}}}>"
