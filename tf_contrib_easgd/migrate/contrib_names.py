# ruff: noqa: N802 -- libcst dispatches on the node class names: visit_Name, leave_Import, ...
"""contrib's EASGD names, and what is left of tf.contrib in a module after the rewrite.

Helpers of `tf_contrib_easgd.migrate.codemod`: qualified names (through any import alias, with
`tensorflow.compat.v1.X` read as `tensorflow.X`), the removal of contrib imports that the
rewrite left unused, and the findings listing every other use of tf.contrib (and imports of
`tensorflow.examples`, which TF 2's pip package lacks), with the hand edit to make for the
common ones.
"""

import dataclasses

import libcst as cst
import libcst.helpers
from libcst.metadata import PositionProvider, QualifiedNameProvider

from tf_contrib_easgd.migrate import hand_edits, versions

PACKAGE = "tf_contrib_easgd"

_CONTRIB = "tensorflow.contrib"
_EXAMPLES = "tensorflow.examples"  # TF1's pip package had tutorials.mnist.input_data there.
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


def _is_gone(name):
    """Whether the qualified `name` is in a module TF 2 does not have (contrib, examples)."""
    return is_contrib(name) or name == _EXAMPLES or name.startswith(_EXAMPLES + ".")


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


def split_import(node, new_names):
    """Splits `from M import ...` into what stays and `from tf_contrib_easgd import` the rest.

    Args:
        node: an `ImportFrom` naming its names (no `*`).
        new_names: imported name -> this package's name, for the names that move. A renamed
            name keeps the name it was bound to (`X as old_name`).

    Returns:
        (the import of what stays or None, the import from this package or None).
    """
    ours, others = [], []
    for alias in node.names:
        new_name = new_names.get(alias.evaluated_name)
        if new_name is None:
            others.append(alias)
            continue
        asname = alias.asname
        if asname is None and new_name != alias.evaluated_name:
            asname = cst.AsName(name=cst.Name(alias.evaluated_name))
        ours.append(alias.with_changes(name=cst.Name(new_name), asname=asname))
    if not ours:
        return node, None
    package = cst.Name(PACKAGE)
    if not others:
        return None, node.with_changes(module=package, relative=(), names=fix_commas(ours, node))
    return (
        node.with_changes(names=fix_commas(others, node)),
        cst.ImportFrom(module=package, names=fix_commas(ours, None)),
    )


def split_line(line, split):
    """Applies `split` to each small statement of a `SimpleStatementLine`.

    Args:
        line: the `SimpleStatementLine`.
        split: statement -> (what stays or None, a statement to add on a line below or None).

    Returns:
        The line, or a `FlattenSentinel` of the line and one holding the added statements.
    """
    body, added = [], []
    for statement in line.body:
        kept, ours = split(statement)
        body += [kept] if kept is not None else []
        added += [ours] if ours is not None else []
    if not added:
        return line
    if not body:
        return line.with_changes(body=_last_without_semicolon(added))
    return cst.FlattenSentinel(
        [
            line.with_changes(body=_last_without_semicolon(body)),
            cst.SimpleStatementLine(body=_last_without_semicolon(added)),
        ]
    )


def _last_without_semicolon(statements):
    return [*statements[:-1], statements[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)]


class UseCollector(cst.CSTVisitor):
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


def imports_contrib(node, test=is_contrib):
    """Returns what of tf.contrib (or what `test` accepts) an import statement imports.

    Args:
        node: an `Import` or `ImportFrom`.
        test: the predicate on qualified names; `is_contrib` unless given.

    Returns:
        The qualified name of the first module or name imported that passes `test`, or ''.
    """
    if isinstance(node, cst.Import):
        paths = [normalize(a.evaluated_name) for a in node.names]
    else:
        module = normalize(import_module_name(node) or "")
        names = [] if isinstance(node.names, cst.ImportStar) else node.names
        paths = [f"{module}.{a.evaluated_name}" for a in names if module] + [module]
    return next((path for path in paths if path and test(path)), "")


def remove_unused_contrib_imports(module, copies=()):
    """Removes imports of EASGD's contrib modules that nothing uses after the rewrite.

    Args:
        module: the rewritten `libcst.Module`.
        copies: names of local copies of contrib's module: an import binding one of them
            that nothing uses any more goes too.

    Returns:
        The module without those imports.
    """
    if not copies and not versions.mentions(module, ["contrib"]):
        return module  # Every import it removes is contrib's, or a copy's.
    return _remove_unused(module, copies)


def _remove_unused(module, copies):
    wrapper = versions.wrapper(module)
    uses = UseCollector()
    wrapper.visit(uses)
    chains = {name for _, _, name in uses.contrib_uses}
    plain_tensorflow = any(
        isinstance(node, cst.Import)
        and any(a.evaluated_name == "tensorflow" and not a.asname for a in node.names)
        for node in uses.imports
    )
    changes = {}  # id of an import alias -> its replacement (None: remove).
    for node in uses.imports:
        if isinstance(node.names, cst.ImportStar):
            continue
        contrib = imports_contrib(node)
        module_name = None if isinstance(node, cst.Import) else import_module_name(node)
        for alias in node.names:
            if module_name is None:
                path = alias.evaluated_name
            else:
                path = f"{module_name}.{alias.evaluated_name}"
            bound = alias.evaluated_alias or alias.evaluated_name
            if path in copies and (module_name or alias.asname or "." not in path):
                if (bound, path) not in uses.used:
                    changes[id(alias)] = None
                continue
            if not contrib or normalize(path) not in EASGD_MODULE_PATHS:
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
            elif (bound, path) not in uses.used:
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


def _import_advice(node, path):
    """The hand edit for an import of `path` (what TF 2 lacks); for `from M import a, b` of
    names whose advice differs (a data loader and a model module), each name's, named."""
    module = normalize(import_module_name(node) or "") if isinstance(node, cst.ImportFrom) else ""
    if module and not isinstance(node.names, cst.ImportStar) and len(node.names) > 1:
        texts = {}
        for alias in node.names:
            text = hand_edits.hand_edit(f"{module}.{alias.evaluated_name}")
            if text and text not in texts.values():
                texts[alias.evaluated_name] = text
        if len(texts) > 1:
            return " ".join(f"{name}: {text}" for name, text in texts.items())
    return hand_edits.hand_edit(path) or "replace what it imports."


def leftover_findings(module):
    """Lists what is left of tf.contrib in `module`: imports, then uses, in line order.

    Imports of `tensorflow.examples` are listed too. Each finding names the hand edit to
    make when `hand_edits.HAND_EDITS` has one for the name.

    Args:
        module: the migrated `libcst.Module`.

    Returns:
        A list of `Finding`s with line numbers of `module`'s text.
    """
    if not versions.mentions(module, ["contrib", "examples"]):
        return []
    wrapper = versions.wrapper(module)
    uses = UseCollector()
    wrapper.visit(uses)
    positions = wrapper.resolve(PositionProvider)
    findings = []
    for node in uses.imports:
        path = imports_contrib(node, test=_is_gone)
        if path:
            code = wrapper.module.code_for_node(node).strip()
            gone = "tf.contrib" if is_contrib(path) else "tensorflow.examples"
            findings.append(
                Finding(
                    positions[node].start.line,
                    f"`{code}` fails on TF 2, which has no {gone}: " + _import_advice(node, path),
                )
            )
    findings += [
        Finding(
            line,
            f"`{wrapper.module.code_for_node(node)}` ({name}) was not converted: TF 2 has no "
            "tf.contrib; "
            + (
                hand_edits.hand_edit(name)
                or f"{PACKAGE} replaces only Elastic Averaging SGD: find the TF 2 counterpart "
                "in TensorFlow's migration guide, or port what it did by hand."
            ),
        )
        for line, node, name in uses.contrib_uses
    ]
    return sorted(findings, key=lambda finding: finding.line)
