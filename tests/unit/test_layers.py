"""The package's layers: imports go one way, and TensorFlow loads only when it is used.

The library is the package folder and its wings (`exchange/`, `cluster/`, `job/`,
`estimator/`, `eager/`, `keras/`); the trainer (`trainer/`) with its runner (`runner/`, a
local job's processes) and the migration tool (`migrate/`) are programs built on the
library's public names. Read from the source with
`ast`, so no module needs importing to be checked; the lazy loading is checked in fresh
interpreters.
"""

import ast
import pathlib

import pytest

import tf_contrib_easgd

PACKAGE = pathlib.Path(tf_contrib_easgd.__file__).resolve().parent


#: The programs, each with the other programs it may import at module level: the runner
#: builds on the trainer's modules (a task's flags, progress events, model_dir files, exit
#: codes); the trainer and the migration tool import no other program there.
PROGRAMS = {"trainer": (), "runner": ("trainer",), "migrate": ()}
#: The other programs a module may import inside a function only: the trainer's command
#: line imports the runner when it runs a local job. So importing either package never
#: imports the other in a cycle, and a task's process never loads the runner.
IMPORTS_IN_FUNCTIONS = {"trainer/cli.py": ("runner",)}


def _outside_functions(node):
    """`node` and the nodes under it that are not in the body of a function."""
    yield node
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield from _outside_functions(child)


def _imports(path, in_functions=True):
    """(module, names) of each `import` / `from ... import` statement of `path`; with
    `in_functions` False, of those at module level only (not in a function's body)."""
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree) if in_functions else _outside_functions(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module, [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []


def _modules(folder):
    return sorted((PACKAGE / folder).glob("*.py"))


#: The library's wings and the wings each may import from, one way: `cluster` and `job`
#: need no other, the exchange may tell a lost task (`job.recovery`), the algorithm (the
#: package folder: getter, optimizer, hook, penalty, saver) builds on the exchange, and the
#: integrations with Estimator, eager loops and Keras on any of them (Keras's callback on
#: the eager worker, the eager worker's 16-bit wire on the exchange's).
WINGS = {
    "cluster": (),
    "job": (),
    "exchange": ("job",),
    "algorithm": ("exchange", "job"),
    "estimator": ("algorithm", "cluster", "job"),
    "eager": ("algorithm", "cluster", "exchange", "job"),
    "keras": ("eager",),
}


#: The library's modules: the package folder (the algorithm) and its wings.
LIBRARY = _modules("") + [path for wing in WINGS if wing != "algorithm" for path in _modules(wing)]


def _wing(module):
    """The wing of a dotted module of the library ("tf_contrib_easgd.exchange.wire")."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in WINGS else "algorithm"


@pytest.mark.parametrize("path", LIBRARY, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_the_wings_import_one_way(path):
    relative = path.relative_to(PACKAGE)
    wing = relative.parts[0] if len(relative.parts) > 1 else "algorithm"
    if relative.name == "__init__.py" and wing == "algorithm":
        return  # The package's __init__ maps every public name, lazily.
    for module, names in _imports(path):
        if module == "tf_contrib_easgd":  # `from tf_contrib_easgd import _validation`
            targets = [_wing(f"tf_contrib_easgd.{name}") for name in names]
        elif module.startswith("tf_contrib_easgd."):
            targets = [_wing(module)]
        else:
            continue
        for target in targets:
            assert target == wing or target in WINGS[wing], (
                f"{relative} ({wing}) imports {module} ({target}); {wing} may import "
                f"{list(WINGS[wing]) or 'no other wing'}"
            )


@pytest.mark.parametrize("path", LIBRARY, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_the_library_imports_neither_program(path):
    for module, _ in _imports(path):
        assert not module.startswith(
            tuple(f"tf_contrib_easgd.{program}" for program in PROGRAMS)
        ), f"{path.name} imports {module}"


PROGRAM_MODULES = [p for program in PROGRAMS for p in _modules(program)]


def _program_id(path):
    return f"{path.parent.name}/{path.name}"


@pytest.mark.parametrize("path", PROGRAM_MODULES, ids=_program_id)
def test_the_programs_use_the_librarys_public_names_only(path):
    program = path.parent.name
    for module, names in _imports(path):
        if module == "tf_contrib_easgd":
            private = sorted(set(names) - set(tf_contrib_easgd.__all__))
            assert not private, f"{program}/{path.name} imports {private} from the library"
        elif module.startswith("tf_contrib_easgd."):
            # Its own subpackage or another program (next test); a library module is off
            # limits.
            assert module.split(".")[1] in PROGRAMS, f"{program}/{path.name} imports {module}"


@pytest.mark.parametrize("path", PROGRAM_MODULES, ids=_program_id)
def test_the_programs_import_each_other_one_way(path):
    program = path.parent.name
    in_functions = IMPORTS_IN_FUNCTIONS.get(_program_id(path), ())
    at_module_level = {module for module, _ in _imports(path, in_functions=False)}
    for module, _ in _imports(path):
        other = module.split(".")[1] if module.startswith("tf_contrib_easgd.") else program
        if other == program or other not in PROGRAMS or other in PROGRAMS[program]:
            continue
        assert other in in_functions and module not in at_module_level, (
            f"{_program_id(path)} imports {module}; {program} may import "
            f"{list(PROGRAMS[program]) or 'no other program'} at module level, "
            f"{list(in_functions) or 'none'} inside a function"
        )


def test_no_program_imports_another_both_ways():
    # One way at module level: the lazy imports of IMPORTS_IN_FUNCTIONS go back up, never a
    # module-level import both ways.
    for program, others in PROGRAMS.items():
        for other in others:
            assert program not in PROGRAMS[other], f"{program} and {other} import each other"
    for module, others in IMPORTS_IN_FUNCTIONS.items():
        program = module.split("/")[0]
        assert all(program in PROGRAMS[other] for other in others), module


def test_every_public_name_resolves():
    assert set(tf_contrib_easgd.__all__) == {"__version__", *tf_contrib_easgd._PUBLIC}
    for name in tf_contrib_easgd.__all__:
        assert getattr(tf_contrib_easgd, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'ElasticAverage'"):
        tf_contrib_easgd.ElasticAverage  # noqa: B018 (the lookup is the test)


def test_setup_installs_every_subpackage():
    # A wheel holds only the packages setup.py lists; an editable install would not notice.
    setup = (PACKAGE.parent / "setup.py").read_text()
    call = next(
        node
        for node in ast.walk(ast.parse(setup))
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "setup"
    )
    listed = next(ast.literal_eval(k.value) for k in call.keywords if k.arg == "packages")
    found = sorted(
        ".".join(path.parent.relative_to(PACKAGE.parent).parts)
        for path in PACKAGE.rglob("__init__.py")
    )
    assert sorted(listed) == found
