# ruff: noqa: N802 -- libcst dispatches on the node class names: visit_Name, visit_If, ...
"""What the rewrites need to know about a module before changing it: its `Facts`.

A helper of `tf_contrib_easgd.migrate.codemod`: the names bound by its imports, the values
assigned to its variables, whether it is a script (a main guard, or TensorFlow work at its
top level), builds TF1 graphs, uses EASGD, or picks a mode itself.
"""

import dataclasses

import libcst as cst
from libcst.metadata import QualifiedNameProvider

from tf_contrib_easgd.migrate import contrib_names as names
from tf_contrib_easgd.migrate import versions
from tf_contrib_easgd.migrate.contrib_names import PACKAGE, RENAMES

# TF1 APIs that only work while building a graph (after `tensorflow.` or
# `tensorflow.compat.v1.`). A script using one of them, or EASGD, needs graph mode.
_GRAPH_APIS = frozenset(
    {
        "placeholder",
        "Session",
        "InteractiveSession",
        "get_variable",
        "variable_scope",
        "get_default_graph",
        "global_variables_initializer",
        "local_variables_initializer",
        "train.MonitoredTrainingSession",
        "train.MonitoredSession",
        "train.SingularMonitoredSession",
        "train.Supervisor",
        "train.Saver",
        "train.replica_device_setter",
        # Queue input pipelines: graph ops only, run by queue runners.
        "train.shuffle_batch",
        "train.batch",
        "train.string_input_producer",
        "train.slice_input_producer",
        "train.start_queue_runners",
        "FixedLengthRecordReader",
        "TFRecordReader",
    }
)
# tf-slim (tf.contrib.slim's successor) builds TF1 graphs only.
_GRAPH_PACKAGES = ("tf_slim.",)
# The same, reached through TensorFlow's internal modules (`tensorflow.python.*`).
_INTERNAL_GRAPH_APIS = frozenset(api.rpartition(".")[2] for api in _GRAPH_APIS)
# Calls that make a module a script when they run at its top level (outside functions and
# classes), besides the graph APIs: a server, or the program's main.
_SCRIPT_CALLS = frozenset(
    {
        "tensorflow.train.Server",
        "tensorflow.distribute.Server",
        "tensorflow.app.run",
        "absl.app.run",
    }
)
_MODE_SWITCHES = frozenset(
    {
        "disable_v2_behavior",
        "enable_v2_behavior",
        "disable_eager_execution",
        "enable_eager_execution",
    }
)


@dataclasses.dataclass
class Facts:
    """What the migration needs to know about a module before changing it.

    Attributes:
        module_aliases: dotted module -> name bound to it by a top-level `import`.
        string_values: variable name -> the expressions assigned to it anywhere.
        has_main_guard: whether the module has `if __name__ == "__main__":`.
        works_at_top_level: whether it calls a TF1 graph API, a server or the program's
            `app.run` outside functions, lambdas and classes: it does its work on import.
        builds_graphs: whether it uses TF1 graph APIs or EASGD.
        uses_easgd: whether it uses EASGD (contrib's, this package's or a local copy's).
        picks_mode: whether it already enables or disables TF 2 behaviour itself.
    """

    module_aliases: dict
    string_values: dict
    has_main_guard: bool = False
    works_at_top_level: bool = False
    builds_graphs: bool = False
    uses_easgd: bool = False
    picks_mode: bool = False

    @property
    def is_script(self):
        """Whether the module is a program rather than a library: it has a main guard, or
        builds graphs, opens sessions or starts a server at its top level (tutorials often
        do). A module whose TensorFlow work sits only in functions is a library."""
        return self.has_main_guard or self.works_at_top_level

    @classmethod
    def of(cls, module, wrapper=None):
        """Collects the facts of a `libcst.Module`.

        Args:
            module: a `libcst.Module`.
            wrapper: a `MetadataWrapper` of `module` to reuse, with the metadata it has
                resolved already; by default that of `versions.wrapper`.
        """
        wrapper = wrapper or versions.wrapper(module)
        collector = _FactCollector()
        wrapper.visit(collector)
        return collector.facts


class _FactCollector(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (QualifiedNameProvider,)

    def __init__(self):
        super().__init__()
        self.facts = Facts(module_aliases={}, string_values={})
        self._depth = 0  # Indented blocks around the node.
        self._defs = 0  # Functions, classes and lambdas around the node.

    def visit_IndentedBlock(self, node):
        self._depth += 1

    def leave_IndentedBlock(self, original_node):
        self._depth -= 1

    def visit_ClassDef(self, node):
        self._defs += 1

    def leave_ClassDef(self, original_node):
        self._defs -= 1

    def leave_FunctionDef(self, original_node):
        self._defs -= 1

    def visit_Lambda(self, node):
        self._defs += 1

    def leave_Lambda(self, original_node):
        self._defs -= 1

    def visit_Import(self, node):
        if self._defs:
            return  # Module-level imports only, including those in `try:` or `if`.
        for alias in node.names:
            if alias.evaluated_alias:
                self.facts.module_aliases.setdefault(alias.evaluated_name, alias.evaluated_alias)
            else:
                top = alias.evaluated_name.split(".")[0]
                self.facts.module_aliases.setdefault(top, top)

    def visit_Assign(self, node):
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                self.facts.string_values.setdefault(target.target.value, []).append(node.value)

    def visit_FunctionDef(self, node):
        self._defs += 1
        self.facts.string_values.setdefault(node.name.value, []).append(node)

    def visit_If(self, node):
        if self._depth == 0 and _is_main_guard(node.test):
            self.facts.has_main_guard = True

    def visit_Call(self, node):
        if self._defs == 0 and any(
            _is_graph_api(name) or name in _SCRIPT_CALLS
            for name in names.qualified_names(self, node.func)
        ):
            self.facts.works_at_top_level = True

    def visit_Attribute(self, node):
        self._note_api(node)

    def visit_Name(self, node):
        self._note_api(node)

    def _note_api(self, node):
        for name in names.qualified_names(self, node):
            if _is_mode_switch(name):
                self.facts.picks_mode = True
            if _builds_graphs(name):
                self.facts.builds_graphs = True
            if _is_easgd(name):
                self.facts.uses_easgd = True


def _is_mode_switch(name):
    """Whether the qualified `name` enables or disables TF 2 behaviour or eager execution."""
    return name.startswith("tensorflow.") and name.removeprefix("tensorflow.") in _MODE_SWITCHES


def _is_graph_api(name):
    """Whether the qualified `name` is a TF1 graph API (a public or an internal name)."""
    return (
        (name.startswith("tensorflow.") and name.removeprefix("tensorflow.") in _GRAPH_APIS)
        or (
            name.startswith("tensorflow.python.")
            and name.rpartition(".")[2] in _INTERNAL_GRAPH_APIS
        )
        or name.startswith(_GRAPH_PACKAGES)
    )


def _is_easgd(name):
    """Whether the qualified `name` is EASGD: contrib's, or anything of this package."""
    return name in RENAMES or name.startswith(PACKAGE + ".")


def _builds_graphs(name):
    """Whether the qualified `name` is a TF1 graph API or EASGD (contrib's or this package's)."""
    return _is_graph_api(name) or _is_easgd(name)


def _is_main_guard(test):
    """Whether `test` is `__name__ == "__main__"` (either way round)."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    target = test.comparisons[0]
    sides = sorted(
        (type(side).__name__, getattr(side, "value", "")) for side in (test.left, target.comparator)
    )
    return isinstance(target.operator, cst.Equal) and sides in (
        [("Name", "__name__"), ("SimpleString", '"__main__"')],
        [("Name", "__name__"), ("SimpleString", "'__main__'")],
    )
