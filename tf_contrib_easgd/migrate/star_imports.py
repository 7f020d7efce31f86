# ruff: noqa: N802 -- libcst dispatches on the node class names: visit_Import, ...
"""Names a module gets by `from M import *`, made explicit so that the rewrites see them.

A helper of `tf_contrib_easgd.migrate.codemod` and `project`. libcst resolves no star import:
in `from common import *` then `tf.contrib.opt.ElasticAverageOptimizer(...)`, `tf` is
nothing to it. When `common` is a module of the tree being migrated, `exported_bindings`
reads what it binds by import (and `slim = tf.contrib.slim`), and `bind` adds those imports
the module uses right after its star import. A star import from outside the tree is named
in the report instead, with the names it may have bound.
"""

import builtins
import dataclasses

import libcst as cst
import libcst.matchers as m
from libcst.metadata import MetadataWrapper, PositionProvider, QualifiedNameProvider, ScopeProvider

from tf_contrib_easgd.migrate import contrib_names as names
from tf_contrib_easgd.migrate import versions
from tf_contrib_easgd.migrate.contrib_names import PACKAGE, Finding
from tf_contrib_easgd.migrate.tf1_apis import from_module, within

# Assignments at the top of a module that are imports in disguise: `slim = tf.contrib.slim`.
MODULE_ASSIGNMENTS = frozenset({"tensorflow.contrib.slim"})
_COMMENT = "# Bound by `{star}` too; easgd-migrate imports them by name to convert their uses."


@dataclasses.dataclass(frozen=True)
class StarImport:
    """One top-level `from M import *` of a module.

    Attributes:
        module: M as spelled, leading dots included.
        bindings: bound name -> the import statement that binds it the same way, for a
            module of the tree; None for a module outside it.
    """

    module: str
    bindings: dict | None


def top_level_star_imports(module):
    """The modules of the top-level `from M import *` statements of `module`, in order."""
    return [star for statement in module.body for star in _stars_in(statement)]


def exported_bindings(module, star_bindings):
    """What `from <module> import *` binds by import, as import statements of their own.

    Args:
        module: the star-imported `libcst.Module`.
        star_bindings: for each of its own star imports (in `top_level_star_imports` order),
            the bindings of that module (a dict) or None when it is outside the tree.

    Returns:
        bound name -> statement text (`import a.b as c`, `from a import b`). Names starting
        with `_` and, when the module defines `__all__` as a literal list, names not in it
        are left out.
    """
    collector = _ExportCollector(list(star_bindings))
    versions.wrapper(module).visit(collector)
    public = collector.public
    return {
        name: text
        for name, text in collector.bindings.items()
        if not name.startswith("_") and (public is None or name in public)
    }


class _ExportCollector(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (QualifiedNameProvider,)

    def __init__(self, star_bindings):
        super().__init__()
        self.bindings = {}
        self.public = None
        self._stars = star_bindings
        self._depth = 0  # Functions, classes and blocks around the node.

    def on_visit(self, node):
        if isinstance(node, cst.IndentedBlock | cst.Lambda):
            self._depth += 1
        return super().on_visit(node)

    def on_leave(self, original_node):
        if isinstance(original_node, cst.IndentedBlock | cst.Lambda):
            self._depth -= 1
        super().on_leave(original_node)

    def visit_Import(self, node):
        if self._depth:
            return
        for alias in node.names:
            name = alias.evaluated_name
            if alias.asname:
                self.bindings[alias.evaluated_alias] = f"import {name} as {alias.evaluated_alias}"
            else:
                self.bindings[name.split(".")[0]] = f"import {name}"

    def visit_ImportFrom(self, node):
        if self._depth:
            return
        if isinstance(node.names, cst.ImportStar):
            exported = self._stars.pop(0) if self._stars else None
            self.bindings.update(exported or {})
            return
        if node.relative:
            return  # Relative to the module's package, not to the importing one.
        module = from_module(node)
        for alias in node.names:
            bound = alias.evaluated_alias or alias.evaluated_name
            renamed = f" as {bound}" if alias.asname else ""
            self.bindings[bound] = f"from {module} import {alias.evaluated_name}{renamed}"

    def visit_Assign(self, node):
        if self._depth or len(node.targets) != 1:
            return
        target = node.targets[0].target
        if not isinstance(target, cst.Name):
            return
        if target.value == "__all__" and isinstance(node.value, cst.List | cst.Tuple):
            strings = [e.value for e in node.value.elements]
            if all(isinstance(s, cst.SimpleString) for s in strings):
                self.public = {s.evaluated_value for s in strings}
            return
        qualified = names.qualified_names(self, node.value)
        module = next((name for name in sorted(qualified) if name in MODULE_ASSIGNMENTS), None)
        if module:
            self.bindings[target.value] = f"import {module} as {target.value}"
        else:
            self.bindings.pop(target.value, None)  # Rebound to something else.


def free_names(module):
    """The names `module` reads but never binds (nor are they builtins), in any scope."""
    wrapper = versions.wrapper(module)
    scopes = {scope for scope in wrapper.resolve(ScopeProvider).values() if scope is not None}
    free = set()
    for scope in scopes:
        for access in scope.accesses:
            name = getattr(access.node, "value", None)
            if isinstance(name, str) and not access.referents and not hasattr(builtins, name):
                free.add(name)
    return free


def bind(module, stars):
    """Adds, after each top-level star import of the tree, the imports of the names used.

    Args:
        module: a `libcst.Module`.
        stars: `StarImport`s of its star imports, in `top_level_star_imports` order; a star
            import none of them names (a local copy of contrib's module) is left alone.

    Returns:
        (the module, `Finding`s with lines of the returned module's text: one per star import
        from outside the tree when the module reads names it does not bind).
    """
    if not stars:
        return module, []  # Most modules: no scope analysis needed.
    free = free_names(module)
    if not free:
        return module, []
    wanted = []
    for star in stars:
        found = star.bindings or {}
        wanted.append([found[name] for name in sorted(free) if name in found])
        free -= set(found)
    config = module.config_for_parsing
    pending = {}  # M -> [(its StarImport, the import statements it adds)], in order.
    for star, texts in zip(stars, wanted, strict=True):
        pending.setdefault(star.module, []).append((star, texts))
    body, outside_lines = [], []
    for statement in module.body:
        body.append(statement)
        for module_name, _ in _stars_in(statement):
            if not pending.get(module_name):
                continue  # Not among `stars`: a local copy of contrib's module, say.
            star, texts = pending[module_name].pop(0)
            if star.bindings is None:
                outside_lines.append((len(body), module_name))
            if not texts:
                continue
            comment = cst.EmptyLine(comment=cst.Comment(_COMMENT.format(star=_spell(module_name))))
            added = [cst.parse_statement(text, config=config) for text in texts]
            added[0] = added[0].with_changes(leading_lines=[comment])
            body += added
    module = module.with_changes(body=body)
    findings = []
    if free:
        unbound = ", ".join(sorted(free))
        # `tf.contrib...` through such a name fails on TF 2 for certain: not converted.
        contrib = {
            node.value.value
            for node in m.findall(module, m.Attribute(value=m.Name(), attr=m.Name("contrib")))
        }
        for line_index, module_name in outside_lines:
            if within(module_name, "tensorflow") or within(module_name, PACKAGE):
                continue  # Known: names that stay TensorFlow's, or this package's.
            line = _line_of(module, line_index)
            note = _outside_note(module_name, unbound)
            findings.append(Finding(line, note, unconverted=bool(contrib & free)))
    return module, findings


def _spell(module_name):
    return f"from {module_name} import *"


def _stars_in(statement):
    if not isinstance(statement, cst.SimpleStatementLine):
        return []
    return [
        (from_module(small), len(small.relative))
        for small in statement.body
        if isinstance(small, cst.ImportFrom) and isinstance(small.names, cst.ImportStar)
    ]


def _line_of(module, index):
    """The 1-based line of the top-level statement `module.body[index - 1]`."""
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    return positions[module.body[index - 1]].start.line


def _outside_note(module_name, unbound):
    return (
        f"`{_spell(module_name)}` comes from outside the files migrated, so easgd-migrate "
        f"cannot see what it binds: {unbound} are read here and bound nowhere in this file. "
        "If one of them is TensorFlow (or contrib), its uses were not checked or converted: "
        f"migrate {module_name}'s file with this one (easgd-migrate DIR on the whole tree), "
        "or import those names by name here and run easgd-migrate again."
    )
