"""The tree easgd-migrate is given: which module imports which, and what each needs to know.

A helper of `tf_contrib_easgd.migrate.cli`. A project splits its job across modules: a
script that uses EASGD, a `common.py` it star-imports `tf` from, an input helper and model
modules whose functions build its graph. `contexts` reads every file of the tree before any
is rewritten and gives each module a `Context`: the bindings of its star imports, whether it
builds graph ops for a module that uses EASGD (its TF1 summaries and `tf.Variable` then move
to `tf.compat.v1` too), and which script of the tree sets the TF1 mode and the Keras 2 switch
for it. Imports resolve against the file's own folder (a script's `sys.path[0]`) and the
folders given, as Python would find them.
"""

import dataclasses
import pathlib

import libcst as cst

from tf_contrib_easgd.migrate import legacy_keras, star_imports, versions
from tf_contrib_easgd.migrate.module_facts import Facts
from tf_contrib_easgd.migrate.tf1_apis import from_module


@dataclasses.dataclass(frozen=True)
class Context:
    """What the migration of one module needs to know about the other modules of its tree.

    Attributes:
        stars: the `star_imports.StarImport` of each top-level star import, in order.
        graph_helper: an in-tree module using EASGD that imports this one (directly or not),
            or ''; this module's functions then build graph ops for it.
        mode_script: an in-tree script building TF1 graphs that imports this one, or ''.
        keras2_import: for a script, '' or the modules it imports that need Keras 2
            (`PATH (API), ...`), so the script sets the switch.
        keras2_script: for a module that needs Keras 2 but is no script, the in-tree script
            importing it that sets the switch, or ''.
    """

    stars: tuple = ()
    graph_helper: str = ""
    mode_script: str = ""
    keras2_import: str = ""
    keras2_script: str = ""


EMPTY = Context()


@dataclasses.dataclass
class _Module:
    path: pathlib.Path
    imports: list  # In-tree files it imports, star targets included.
    stars: tuple = ()
    facts: Facts | None = None
    keras2: tuple = (0, "")  # (line, API) of a Keras-2-only use, counting tf.keras.


def contexts(files, roots=()):
    """Reads the tree and returns a `Context` for each file.

    Args:
        files: the Python files to migrate (`pathlib.Path`s), as `cli.find_python_files`
            lists them.
        roots: the folders given on the command line: imports resolve against them too.

    Returns:
        file -> `Context`; a file that cannot be read or parsed gets `EMPTY` (its own
        migration reports why).
    """
    parsed = {}
    for path in files:
        try:
            parsed[path] = cst.parse_module(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, cst.ParserSyntaxError):
            continue
    resolver = _Resolver(parsed, roots)
    modules = {path: _Module(path, resolver.imports(path, tree)) for path, tree in parsed.items()}
    exported = {}
    for path in parsed:
        modules[path].stars = _star_imports(path, parsed, resolver, exported, set())
    keras2 = {}  # path -> (first use counting tf.keras, first use not counting it).
    for path, tree in parsed.items():
        versions.wrapper(tree, copy=False)  # Straight from the parser: no copy needed.
        bound, _ = star_imports.bind(tree, modules[path].stars)
        # One wrapper, so that the scope analysis the visitors need runs once (`bind` read
        # it too); `bound` is the parsed tree with parsed imports added: no copy either.
        wrapper = versions.wrapper(bound, copy=False)
        modules[path].facts = Facts.of(bound, wrapper)
        with_keras = legacy_keras.keras2_use(bound, True, wrapper)
        without = legacy_keras.keras2_use(bound, False, wrapper) if with_keras[0] else (0, "")
        keras2[path] = (with_keras, without)
    reach = {path: _reachable(path, modules) for path in parsed}
    for path in parsed:
        module = modules[path]
        helper = _first(reach, path, lambda other: modules[other].facts.uses_easgd)
        graph_code = module.facts.builds_graphs or bool(helper)
        module.keras2 = keras2[path][0 if graph_code else 1]
    found = {}
    for path in parsed:
        module = modules[path]
        helper = _first(reach, path, lambda other: modules[other].facts.uses_easgd)
        graph_script = _first(reach, path, lambda other: _graph_script(modules[other].facts))
        keras2_import = ""
        if module.facts.is_script:
            needing = [other for other in reach[path] if other != path and modules[other].keras2[0]]
            keras2_import = ", ".join(
                f"{other} ({modules[other].keras2[1]})" for other in sorted(needing, key=str)
            )
        keras2_script = ""
        if module.keras2[0] and not module.facts.is_script:
            keras2_script = _first(reach, path, lambda other: modules[other].facts.is_script)
        found[path] = Context(
            stars=module.stars,
            graph_helper=helper,
            mode_script=graph_script,
            keras2_import=keras2_import,
            keras2_script=keras2_script,
        )
    return {path: found.get(path, EMPTY) for path in files}


def _graph_script(facts):
    return facts.is_script and facts.builds_graphs


def _first(reach, path, test):
    """The first (by name) other module whose reachable modules include `path` and that
    passes `test`, as a string, or ''."""
    importers = sorted(
        (other for other, reached in reach.items() if other != path and path in reached), key=str
    )
    return next((str(other) for other in importers if test(other)), "")


def _reachable(path, modules):
    """The in-tree modules `path` imports, directly or through others (itself included)."""
    seen, stack = {path}, [path]
    while stack:
        for other in modules[stack.pop()].imports:
            if other not in seen:
                seen.add(other)
                stack.append(other)
    return seen


def _star_imports(path, parsed, resolver, exported, visiting):
    """The `StarImport`s of `path`'s top-level star imports (`exported` caches bindings)."""
    stars = []
    for module_name, level in star_imports.top_level_star_imports(parsed[path]):
        target = resolver.resolve(path, module_name.lstrip("."), level)
        stars.append(
            star_imports.StarImport(
                module_name, _exported(target, parsed, resolver, exported, visiting)
            )
        )
    return tuple(stars)


def _exported(path, parsed, resolver, exported, visiting):
    """The bindings `from <path's module> import *` gives, or None outside the tree."""
    if path is None:
        return None
    if path not in exported:
        if path in visiting:
            return {}  # An import cycle: its bindings are being read already.
        visiting.add(path)
        stars = _star_imports(path, parsed, resolver, exported, visiting)
        versions.wrapper(parsed[path], copy=False)  # Straight from the parser.
        exported[path] = star_imports.exported_bindings(
            parsed[path], [star.bindings for star in stars]
        )
        visiting.discard(path)
    return exported[path]


class _Resolver:
    """Finds the file of the tree an import names, as Python would."""

    def __init__(self, parsed, roots):
        self._files = {path.resolve(): path for path in parsed}
        self._roots = [pathlib.Path(root).resolve() for root in roots]

    def resolve(self, path, dotted, level=0):
        """The file of module `dotted` imported from `path` (`level` leading dots), or None."""
        if level:
            base = path.resolve().parent
            for _ in range(level - 1):
                base = base.parent
            bases = [base]
        else:
            bases = [path.resolve().parent, *self._roots]
        parts = dotted.split(".") if dotted else []
        for base in bases:
            target = base.joinpath(*parts)
            for candidate in (target.with_suffix(".py"), target / "__init__.py"):
                if parts and candidate in self._files:
                    return self._files[candidate]
                if not parts and candidate.name == "__init__.py" and candidate in self._files:
                    return self._files[candidate]
        return None

    def imports(self, path, module):
        """The in-tree files `module` (at `path`) imports, anywhere in it."""
        found = []
        for node in _imports_of(module):
            if isinstance(node, cst.Import):
                for alias in node.names:
                    found.append(self.resolve(path, alias.evaluated_name))
                continue
            level = len(node.relative)
            module_name = from_module(node).lstrip(".")
            found.append(self.resolve(path, module_name, level))
            if not isinstance(node.names, cst.ImportStar):
                for alias in node.names:
                    dotted = ".".join(filter(None, [module_name, alias.evaluated_name]))
                    found.append(self.resolve(path, dotted, level))
        return [file for file in dict.fromkeys(found) if file is not None and file != path]


def _imports_of(module):
    collector = _Imports()
    module.visit(collector)
    return collector.found


class _Imports(cst.CSTVisitor):
    def __init__(self):
        super().__init__()
        self.found = []

    def visit_Import(self, node):  # noqa: N802 -- libcst's name.
        self.found.append(node)

    def visit_ImportFrom(self, node):  # noqa: N802 -- libcst's name.
        self.found.append(node)
