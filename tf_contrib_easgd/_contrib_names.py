# ruff: noqa: N802 -- libcst dispatches on the node class names: visit_Name, leave_Import, ...
"""contrib's EASGD names, and what is left of tf.contrib in a module after the rewrite.

Helpers of `tf_contrib_easgd._codemod`: qualified names (through any import alias, with
`tensorflow.compat.v1.X` read as `tensorflow.X`), the removal of contrib imports that the
rewrite left unused, and the findings listing every other use of tf.contrib.
"""

import dataclasses

import libcst as cst
import libcst.helpers
from libcst.metadata import MetadataWrapper, PositionProvider, QualifiedNameProvider

PACKAGE = "tf_contrib_easgd"

_CONTRIB = "tensorflow.contrib"
CONTRIB_OPT = "tensorflow.contrib.opt"
CONTRIB_MODULE = "tensorflow.contrib.opt.python.training.elastic_average_optimizer"

# Fully qualified contrib name -> name in this package. `tf.contrib.opt` exported the two
# classes; the module itself also held the name constants and the (private) hook class.
RENAMES = {
    **{
        f"{CONTRIB_OPT}.{name}": name
        for name in ("ElasticAverageOptimizer", "ElasticAverageCustomGetter")
    },
    **{
        f"{CONTRIB_MODULE}.{name}": name
        for name in (
            "ElasticAverageOptimizer",
            "ElasticAverageCustomGetter",
            "LOCAL_VARIABLE_NAME",
            "GLOBAL_VARIABLE_NAME",
            "GLOBAL_STEP",
        )
    },
    f"{CONTRIB_MODULE}._ElasticAverageOptimizerHook": "ElasticAverageOptimizerHook",
}

# Modules on the way to the EASGD names: an import of one of these that nothing uses any
# more after the rewrite is removed (it would fail on TF 2, which has no tf.contrib).
EASGD_MODULE_PATHS = frozenset(
    ".".join(CONTRIB_MODULE.split(".")[:end]) for end in range(2, CONTRIB_MODULE.count(".") + 2)
)


@dataclasses.dataclass(frozen=True)
class Finding:
    """Something the migration could not do, or a note about a module.

    Attributes:
        line: 1-based line in the migrated text.
        message: what was left and what to do about it.
        unconverted: True when the migrated module still cannot run on TF 2 as it is;
            False for an advisory note.
    """

    line: int
    message: str
    unconverted: bool = True


def qualified_names(wrapper_visitor, node):
    """Returns the qualified names of `node`, with `tensorflow.compat.v1.` read as `tensorflow.`."""
    names = wrapper_visitor.get_metadata(QualifiedNameProvider, node, set())
    return {normalize(q.name) for q in names}


def normalize(name):
    """Maps `tensorflow.compat.v1.X` to `tensorflow.X`: TF 1.14+ offered both spellings."""
    prefix = "tensorflow.compat.v1."
    return "tensorflow." + name[len(prefix) :] if name.startswith(prefix) else name


def is_contrib(name):
    """Whether the qualified `name` is tf.contrib or inside it."""
    return name == _CONTRIB or name.startswith(_CONTRIB + ".")


def import_module_name(node):
    """Returns the absolute module of an `ImportFrom`, or None for a relative import."""
    if node.relative or node.module is None:
        return None
    return libcst.helpers.get_full_name_for_node(node.module)


def fix_commas(aliases, original):
    """Drops the trailing comma of the last alias unless the import is parenthesized."""
    if original is not None and original.lpar is not None:
        return list(aliases)
    return [*aliases[:-1], aliases[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)]


class _UseCollector(cst.CSTVisitor):
    """Collects, outside import statements, the names read and the contrib chains used."""

    METADATA_DEPENDENCIES = (QualifiedNameProvider, PositionProvider)

    def __init__(self):
        super().__init__()
        self.used = set()  # (name, qualified name) pairs read outside imports.
        self.contrib_uses = []  # (line, node, qualified name) of maximal contrib chains.
        self.imports = []  # Import and ImportFrom nodes, in order.
        self._in_import = 0
        self._inner = set()  # ids of nodes that are the `.value` of an Attribute.

    def visit_Import(self, node):
        self._in_import += 1
        self.imports.append(node)

    def leave_Import(self, original_node):
        self._in_import -= 1

    def visit_ImportFrom(self, node):
        self._in_import += 1
        self.imports.append(node)

    def leave_ImportFrom(self, original_node):
        self._in_import -= 1

    def visit_Attribute(self, node):
        if not self._in_import:
            self._inner.add(id(node.value))
            self._record(node)

    def visit_Name(self, node):
        if not self._in_import:
            for q in self.get_metadata(QualifiedNameProvider, node, set()):
                self.used.add((node.value, q.name))
            self._record(node)

    def _record(self, node):
        if id(node) in self._inner:
            return  # Part of a longer chain, recorded already.
        for name in sorted(qualified_names(self, node)):
            if is_contrib(name):
                line = self.get_metadata(PositionProvider, node).start.line
                self.contrib_uses.append((line, node, name))
                return


def imports_contrib(node):
    """Whether an import statement imports a tf.contrib module or something from one."""
    if isinstance(node, cst.Import):
        return any(is_contrib(normalize(a.evaluated_name)) for a in node.names)
    module = normalize(import_module_name(node) or "")
    if is_contrib(module):
        return True
    names = [] if isinstance(node.names, cst.ImportStar) else node.names
    return bool(module) and any(is_contrib(f"{module}.{a.evaluated_name}") for a in names)


def remove_unused_contrib_imports(module):
    """Removes imports of EASGD's contrib modules that nothing uses after the rewrite."""
    wrapper = MetadataWrapper(module)
    uses = _UseCollector()
    wrapper.visit(uses)
    chains = {name for _, _, name in uses.contrib_uses}
    plain_tensorflow = any(
        isinstance(node, cst.Import)
        and any(a.evaluated_name == "tensorflow" and not a.asname for a in node.names)
        for node in uses.imports
    )
    changes = {}  # id of an import alias -> its replacement (None: remove).
    for node in uses.imports:
        if not imports_contrib(node) or isinstance(node.names, cst.ImportStar):
            continue
        module_name = None if isinstance(node, cst.Import) else import_module_name(node)
        for alias in node.names:
            if module_name is None:
                path = alias.evaluated_name
            else:
                path = f"{module_name}.{alias.evaluated_name}"
            if normalize(path) not in EASGD_MODULE_PATHS:
                continue
            if isinstance(node, cst.Import) and not alias.asname:
                # `import tensorflow.contrib.opt` binds `tensorflow`: keep that binding.
                if any(c == normalize(path) or c.startswith(normalize(path) + ".") for c in chains):
                    continue
                keep_name = not plain_tensorflow and any(n == "tensorflow" for n, _ in uses.used)
                changes[id(alias)] = (
                    alias.with_changes(name=cst.Name("tensorflow")) if keep_name else None
                )
                plain_tensorflow |= keep_name
            elif (alias.evaluated_alias or alias.evaluated_name, path) not in uses.used:
                changes[id(alias)] = None
    if not changes:
        return wrapper.module
    return wrapper.module.visit(_ImportAliasEditor(changes))


class _ImportAliasEditor(cst.CSTTransformer):
    """Replaces or removes import aliases (by identity); drops statements left empty."""

    def __init__(self, changes):
        super().__init__()
        self._changes = changes

    def _edit(self, original_node, updated_node):
        if isinstance(original_node.names, cst.ImportStar):
            return updated_node
        names = []
        for old, new in zip(original_node.names, updated_node.names, strict=True):
            replacement = self._changes.get(id(old), new)
            names += [replacement] if replacement is not None else []
        if not names:
            return cst.RemoveFromParent()
        if len(names) == len(updated_node.names):
            return updated_node.with_changes(names=names)
        return updated_node.with_changes(names=fix_commas(names, updated_node))

    def leave_Import(self, original_node, updated_node):
        return self._edit(original_node, updated_node)

    def leave_ImportFrom(self, original_node, updated_node):
        return self._edit(original_node, updated_node)


def leftover_findings(module):
    """Lists what is left of tf.contrib in `module`: imports, then uses, in line order.

    Args:
        module: the migrated `libcst.Module`.

    Returns:
        A list of `Finding`s with line numbers of `module`'s text.
    """
    wrapper = MetadataWrapper(module)
    uses = _UseCollector()
    wrapper.visit(uses)
    positions = wrapper.resolve(PositionProvider)
    findings = [
        Finding(
            positions[node].start.line,
            f"`{wrapper.module.code_for_node(node).strip()}` fails on TF 2, which has no "
            "tf.contrib: replace what it imports.",
        )
        for node in uses.imports
        if imports_contrib(node)
    ]
    findings += [
        Finding(
            line,
            f"`{wrapper.module.code_for_node(node)}` ({name}) was not converted: TF 2 has no "
            f"tf.contrib, and {PACKAGE} replaces only Elastic Averaging SGD.",
        )
        for line, node, name in uses.contrib_uses
    ]
    return sorted(findings, key=lambda finding: finding.line)
