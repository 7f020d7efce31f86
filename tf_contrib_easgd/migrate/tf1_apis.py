# ruff: noqa: N802 -- libcst dispatches on the node class names: leave_Call, visit_Name, ...
"""TF1 APIs that TF 2 keeps under other names, and local copies of contrib's EASGD module.

Helpers of `tf_contrib_easgd.migrate.codemod`: `Scan` and `LegacyApiRewriter` for `tf.Variable`,
`tf.layers`, TF1's `tf.summary` and EASGD names imported from a local copy of contrib's module
(the Keras 2 switch that `tf.layers` needs is `legacy_keras`'s); `ImportNeeds`, the imports
the rewrites need.
"""

import dataclasses

import libcst as cst
import libcst.helpers
import libcst.matchers as m
from libcst.metadata import (
    PositionProvider,
    QualifiedNameProvider,
    QualifiedNameSource,
)

from tf_contrib_easgd.migrate import contrib_names as names
from tf_contrib_easgd.migrate import versions
from tf_contrib_easgd.migrate.contrib_names import PACKAGE, Finding
from tf_contrib_easgd.migrate.import_aware import ImportAwareTransformer

# Names of contrib's elastic_average_optimizer module -> this package's.
COPY_NAMES = {
    path.rpartition(".")[2]: new
    for path, new in names.RENAMES.items()
    if path.startswith(names.CONTRIB_MODULE + ".")
}
_CLASSES = ("ElasticAverageOptimizer", "ElasticAverageCustomGetter")
# Variable classes that make a resource variable under disable_v2_behavior() on TF 2.
_VARIABLES = frozenset(
    {
        "tensorflow.Variable",
        "tensorflow.python.ops.variables.Variable",  # TF1's class; TF 2's is the v2 one.
        "tensorflow.python.ops.variables.VariableV1",  # TF 1.13 to 2.12.
    }
)
# tf.summary ops TF1 and TF 2 share with other meanings; names only TF1 had; only TF 2 has.
_SUMMARY_OPS = frozenset({"scalar", "histogram", "image", "audio", "text"})
_SUMMARY_V1 = frozenset(
    {
        *("Event", "FileWriter", "FileWriterCache", "SessionLog", "Summary", "initialize"),
        *("SummaryDescription", "TaggedRunMetadata", "all_v2_summary_ops", "merge"),
        *("get_summary_description", "merge_all", "tensor_summary"),
    }
)
_SUMMARY_V2 = frozenset(
    {
        *("SummaryWriter", "create_file_writer", "create_noop_writer", "experimental"),
        *("flush", "graph", "record_if", "should_record_summaries", "write"),
        *("trace_export", "trace_off", "trace_on"),
    }
)


def within(name, prefix):
    """Whether the dotted `name` is `prefix` or lies under it."""
    return name == prefix or name.startswith(prefix + ".")


def _is_known(module):
    """Whether `module` is TensorFlow's or this package's, never a local copy."""
    return within(module, "tensorflow") or within(module, PACKAGE)


def _attr(base, *attrs):
    """Returns the node `base.attrs[0].attrs[1]...`; `base` is a node or a dotted name."""
    node = cst.parse_expression(base) if isinstance(base, str) else base
    for attr in attrs:
        node = cst.Attribute(value=node, attr=cst.Name(attr))
    return node


def from_module(node):
    """The module of an `ImportFrom`, a relative one with its leading dots."""
    module = libcst.helpers.get_full_name_for_node(node.module) if node.module else ""
    return "." * len(node.relative) + module


class ImportNeeds:
    """The names bound to `tensorflow` and this package, and the imports the rewrites need.

    Attributes:
        package: whether `import tf_contrib_easgd` must be added.
        tensorflow: whether `import tensorflow` must be added.
    """

    def __init__(self, module_aliases):
        self._aliases = module_aliases
        self.package = self.tensorflow = False

    def tensorflow_name(self):
        """Returns the name bound to `tensorflow`, noting when it must be imported."""
        self.tensorflow |= "tensorflow" not in self._aliases
        return self._aliases.get("tensorflow", "tensorflow")

    def package_name(self):
        """Returns the name bound to this package, noting when it must be imported."""
        self.package |= PACKAGE not in self._aliases
        return self._aliases.get(PACKAGE, PACKAGE)

    def compat_v1(self):
        """Returns the dotted name of `tensorflow.compat.v1` in the module's own spelling."""
        if "tensorflow" not in self._aliases and "tensorflow.compat.v1" in self._aliases:
            return self._aliases["tensorflow.compat.v1"]
        return self.tensorflow_name() + ".compat.v1"


@dataclasses.dataclass
class Scan:
    """What `LegacyApiRewriter` needs to know about a module before changing it.

    Attributes:
        v2_summaries: whether it uses TF 2's summary API (writers, `record_if`, `step=`).
        copies: module -> line of its first import or use, for each module (other than
            TensorFlow and this package) it takes ElasticAverageOptimizer or
            ElasticAverageCustomGetter from: a local copy of contrib's module.
        copy_class_line: the line of a top-level `class ElasticAverageOptimizer` (or
            `ElasticAverageCustomGetter`) it defines itself, or 0.
    """

    v2_summaries: bool = False
    copies: dict = dataclasses.field(default_factory=dict)
    copy_class_line: int = 0

    @classmethod
    def of(cls, module):
        """Scans a `libcst.Module`."""
        wrapper = versions.wrapper(module)
        collector = _ScanCollector(wrapper)
        wrapper.visit(collector)
        return collector.scan


class _ScanCollector(cst.CSTVisitor):
    # Positions are resolved only for the rare copy of contrib's module (`_line`).
    METADATA_DEPENDENCIES = (QualifiedNameProvider,)

    def __init__(self, wrapper):
        super().__init__()
        self.scan = Scan()
        self._wrapper = wrapper
        self._top = {id(statement) for statement in wrapper.module.body}

    def _names(self, node):
        return {q.name for q in self.get_metadata(QualifiedNameProvider, node, set())}

    def _line(self, node):
        return self._wrapper.resolve(PositionProvider)[node].start.line

    def _copy(self, module, node):
        if module not in self.scan.copies:
            self.scan.copies[module] = self._line(node)

    def visit_ImportFrom(self, node):
        module = from_module(node)
        star = isinstance(node.names, cst.ImportStar)
        if not _is_known(module) and (
            (star and module.rpartition(".")[2] == "elastic_average_optimizer")
            or (not star and any(alias.evaluated_name in _CLASSES for alias in node.names))
        ):
            self._copy(module, node)

    def visit_ClassDef(self, node):
        bases = set().union(*(self._names(base.value) for base in node.bases))
        subclass = any(within(base, PACKAGE) for base in bases)
        if id(node) in self._top and node.name.value in _CLASSES and not subclass:
            self.scan.copy_class_line = self.scan.copy_class_line or self._line(node)

    def visit_Call(self, node):
        steps = any(arg.keyword and arg.keyword.value == "step" for arg in node.args)
        if steps and any(within(n, "tensorflow.summary") for n in self._names(node.func)):
            self.scan.v2_summaries = True

    def visit_Attribute(self, node):
        self.visit_Name(node)
        if isinstance(node.value, cst.Name) and node.attr.value in _CLASSES:
            for q in self.get_metadata(QualifiedNameProvider, node.value, set()):
                if q.source == QualifiedNameSource.IMPORT and not _is_known(q.name):
                    self._copy(q.name, node)

    def visit_Name(self, node):
        for name in self._names(node):
            prefix, _, leaf = name.rpartition(".")
            if (prefix == "tensorflow.summary" and leaf in _SUMMARY_V2) or within(
                name, "tensorflow.compat.v2.summary"
            ):
                self.scan.v2_summaries = True


class LegacyApiRewriter(ImportAwareTransformer):
    """Rewrites the TF1 API names TF 2 moved, and EASGD names taken from a local copy.

    Attributes:
        findings: `Finding`s, with lines of the text visited.
    """

    METADATA_DEPENDENCIES = (QualifiedNameProvider, PositionProvider)

    def __init__(self, scan, needs, builds_graphs):
        """Initializes the rewriter.

        Args:
            scan: the module's `Scan`.
            needs: the `ImportNeeds` shared with the other rewrites.
            builds_graphs: whether the module builds TF1 graphs.
        """
        super().__init__()
        self._scan = scan
        self._needs = needs
        self._graphs = builds_graphs
        self._summaries = builds_graphs and not scan.v2_summaries
        self.findings = []
        self._copy_uses = {}  # Module -> the `M.X` rewritten.

    def _names(self, node):
        return {q.name for q in self.get_metadata(QualifiedNameProvider, node, set())}

    def triggers(self):
        """What a module's text must contain for this rewriter to change or note anything
        (any text when it takes names from a local copy of contrib's module)."""
        if self._scan.copies:
            return ("",)
        return ("layers", "summary", "Variable")

    def _moves(self, summary_name):
        """Whether `tf.summary.<summary_name>` becomes `tf.compat.v1.summary.<...>` here."""
        return summary_name in _SUMMARY_V1 or (self._summaries and summary_name in _SUMMARY_OPS)

    def leave_Attribute(self, original_node, updated_node):
        if self.in_import:
            return updated_node
        base = updated_node.value
        for name in self._names(original_node):
            prefix, _, leaf = name.rpartition(".")
            if name == "tensorflow.layers":
                return _attr(base, "compat", "v1", "layers")
            # `summary.X` (`from tensorflow import summary`) is moved by its import.
            if (
                prefix == "tensorflow.summary"
                and self._moves(leaf)
                and m.matches(base, m.Attribute())
            ):
                moved = _attr(base.value, "compat", "v1", "summary")
                return updated_node.with_changes(value=moved)
            if prefix in self._scan.copies and leaf in COPY_NAMES and isinstance(base, cst.Name):
                self._copy_uses.setdefault(prefix, set()).add(f"{base.value}.{leaf}")
                return _attr(self._needs.package_name(), COPY_NAMES[leaf])
        return updated_node

    def leave_Call(self, original_node, updated_node):
        if not (self._graphs and self._names(original_node.func) & _VARIABLES):
            return updated_node
        func = updated_node.func
        if isinstance(func, cst.Attribute) and "tensorflow" in self._names(
            original_node.func.value
        ):  # Keep the module's own spelling of `tensorflow`.
            return updated_node.with_changes(func=_attr(func.value, "compat", "v1", "Variable"))
        return updated_node.with_changes(func=_attr(self._needs.compat_v1(), "Variable"))

    def leave_Import(self, original_node, updated_node):
        updated_node = super().leave_Import(original_node, updated_node)
        aliases = [
            alias.with_changes(name=_attr("tensorflow.compat.v1", *path.split(".")[1:]))
            if within(path := alias.evaluated_name, "tensorflow.layers")
            else alias
            for alias in updated_node.names
        ]
        return updated_node.with_changes(names=aliases)

    def leave_ImportFrom(self, original_node, updated_node):
        updated_node = super().leave_ImportFrom(original_node, updated_node)
        module = from_module(updated_node)
        star = isinstance(updated_node.names, cst.ImportStar)
        imported = set() if star else {alias.evaluated_name for alias in updated_node.names}
        new = None
        if within(module, "tensorflow.layers"):
            new = "tensorflow.compat.v1" + module.removeprefix("tensorflow")
        elif module == "tensorflow.summary" and imported and all(map(self._moves, imported)):
            new = "tensorflow.compat.v1.summary"
        elif module == "tensorflow" and imported and imported <= {"layers", "summary"}:
            new = "tensorflow.compat.v1" if "layers" in imported or self._summaries else None
        return updated_node.with_changes(module=_attr(new)) if new else updated_node

    def leave_SimpleStatementLine(self, original_node, updated_node):
        line = self.get_metadata(PositionProvider, original_node).start.line
        return names.split_line(updated_node, lambda statement: self._split(statement, line))

    def _split(self, node, line):
        """Splits `from <copy> import ...` into (what stays, the part for this package), and
        `from tensorflow import layers, X` into that of X and `from tensorflow.compat.v1`."""
        module = from_module(node) if isinstance(node, cst.ImportFrom) else None
        if module == "tensorflow" and not isinstance(node.names, cst.ImportStar):
            layers = [alias for alias in node.names if alias.evaluated_name == "layers"]
            others = [alias for alias in node.names if alias.evaluated_name != "layers"]
            if layers and others:
                moved = cst.ImportFrom(
                    module=_attr("tensorflow.compat.v1"), names=names.fix_commas(layers, None)
                )
                return node.with_changes(names=names.fix_commas(others, node)), moved
        if module not in self._scan.copies:
            return node, None
        if isinstance(node.names, cst.ImportStar):
            self.findings.append(
                Finding(
                    line,
                    f"`from {module} import *` takes EASGD from {module}, which looks like a "
                    f"local copy of contrib's module: import the names used from {PACKAGE} "
                    "instead, then delete the copy when nothing else uses it.",
                )
            )
            return node, None
        moved = [alias.evaluated_name for alias in node.names if alias.evaluated_name in COPY_NAMES]
        self.findings.append(self._copy_note(line, module, moved))
        return names.split_import(node, {name: COPY_NAMES[name] for name in moved})

    def notes(self):
        """All the findings of the pass (`findings`, then `copy_findings()`), after it ran."""
        return self.findings + self.copy_findings()

    def copy_findings(self):
        """Notes for the copies reached as `module.Name`, at their first import or use."""
        return [
            self._copy_note(self._scan.copies[module], module, sorted(uses))
            for module, uses in sorted(self._copy_uses.items())
        ]

    @staticmethod
    def _copy_note(line, module, moved):
        return Finding(
            line,
            f"{', '.join(moved)} came from {module}, which looks like a local copy of contrib's "
            f"elastic_average_optimizer.py: {PACKAGE}'s are used now. Delete the copy when "
            f"nothing else uses it (if it was changed, compare it with {PACKAGE} first).",
            unconverted=False,
        )
