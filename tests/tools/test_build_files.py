"""The Bazel build: BUILD files list every Python file, and the pytest runner of tests/BUILD.

`make test` (pytest) finds files by itself; Bazel runs only what a BUILD file lists. These
checks fail as soon as a module, test, benchmark or example exists that no BUILD target
lists, so the two suites cannot drift apart. They parse the BUILD files as Python syntax
(Starlark is a subset of it), need no Bazel and no TensorFlow, and take well under a second.
Source lists must be literal lists of file names; a `glob()` counts as listing nothing.

Under `bazel test` the files are symlinks into the checkout, and `ROOT` resolves to it.
"""

import ast
import pathlib
import re

import pytest
from pytest_runner import pytest_args

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = "tf_contrib_easgd"
RUNNER = "pytest_runner.py"
# Folders whose Python files Bazel must know about, and the rules that may list them.
SOURCE_FOLDERS = {
    PACKAGE: ("py_library",),
    "tests": ("py_library", "py_test"),
    "benchmarks": ("py_binary", "py_library"),
    "examples": ("py_binary", "py_library"),
    "soak": ("py_binary", "py_library"),
    "tools": ("py_binary",),
}
RULES = ("py_binary", "py_library", "py_test")
BUILD_NAMES = ("BUILD", "BUILD.bazel")
E2E_MARK = re.compile(r"\bmark\.e2e\b")


def _build_file(folder):
    """The BUILD file of `folder`, or None."""
    return next((folder / name for name in BUILD_NAMES if (folder / name).is_file()), None)


def _targets(build_file):
    """The py_* rules of a BUILD file.

    Args:
        build_file: Path of the BUILD file.

    Returns:
        A list of (rule, attributes) pairs. Attributes that are not literals (a `glob()`,
        a concatenation) are None.
    """
    targets = []
    for node in ast.walk(ast.parse(build_file.read_text(), filename=str(build_file))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) in RULES:
            attrs = {}
            for keyword in node.keywords:
                try:
                    attrs[keyword.arg] = ast.literal_eval(keyword.value)
                except ValueError:
                    attrs[keyword.arg] = None
            targets.append((node.func.id, attrs))
    return targets


def _srcs(attrs):
    srcs = attrs.get("srcs")
    return srcs if isinstance(srcs, list) else []


def _python_files(folder):
    """The Python files under `folder` (recursively), skipping hidden folders."""
    base = ROOT / folder
    if not base.is_dir():
        return []
    return sorted(
        path
        for path in base.rglob("*.py")
        if not any(part.startswith(".") for part in path.relative_to(base).parts)
    )


def _owning_build_file(path, folder):
    """The BUILD file of the Bazel package that `path` belongs to: the nearest one above it."""
    for parent in path.parents:
        build_file = _build_file(parent)
        if build_file or parent == ROOT / folder:
            return build_file
    return None


def _case(path):
    return str(path.relative_to(ROOT))


SOURCES = [(folder, path) for folder in SOURCE_FOLDERS for path in _python_files(folder)]
TEST_FILES = sorted((ROOT / "tests").glob("test_*.py"))


@pytest.mark.parametrize(("folder", "path"), SOURCES, ids=[_case(p) for _, p in SOURCES])
def test_every_python_file_is_listed_by_a_target(folder, path):
    build_file = _owning_build_file(path, folder)
    assert build_file, f"{_case(path)}: no BUILD file in {folder}/ (see docs/BAZEL.md)."
    name = path.relative_to(build_file.parent).as_posix()
    rules = SOURCE_FOLDERS[folder]
    listed = any(rule in rules and name in _srcs(attrs) for rule, attrs in _targets(build_file))
    assert listed, (
        f"{_case(path)} is in no srcs list of a {' or '.join(rules)} in "
        f"{_case(build_file)}; add it there (see docs/BAZEL.md)."
    )


#: The package's targets and what they list: the library's wings (the algorithm is the
#: package folder's modules but `__init__.py`, which the `library` target lists), its two
#: programs. Each with the targets it depends on, as tests/test_layers.py has the wings.
LAYERS = {
    "library": ((), (":algorithm", ":eager", ":estimator", ":keras")),
    "algorithm": (("",), (":exchange", ":job")),
    "exchange": (("exchange/",), (":job",)),
    "cluster": (("cluster/",), ()),
    "job": (("job/",), ()),
    "estimator": (("estimator/",), (":algorithm", ":cluster")),
    "eager": (("eager/",), (":algorithm", ":cluster", ":exchange", ":job")),
    "keras": (("keras/",), (":eager",)),
    "trainer": (("trainer/",), (":library",)),
    "migrate": (("migrate/",), (":library",)),
}
PUBLIC = ("library", "trainer", "migrate")


def test_package_has_a_target_per_wing_listing_every_module():
    build_file = _build_file(ROOT / PACKAGE)
    assert build_file, f"{PACKAGE}/BUILD is missing."
    targets = {attrs["name"]: attrs for rule, attrs in _targets(build_file)}
    assert {rule for rule, _ in _targets(build_file)} == {"py_library"}
    assert sorted(targets) == sorted([PACKAGE, *LAYERS])
    assert sorted(targets[PACKAGE]["deps"]) == sorted(f":{layer}" for layer in PUBLIC)
    for layer, (folders, deps) in LAYERS.items():
        attrs = targets[layer]
        if layer in PUBLIC:
            assert attrs.get("visibility") == ["//visibility:public"], layer
        modules = sorted(
            folder + p.name
            for folder in folders
            for p in (ROOT / PACKAGE / folder).glob("*.py")
            if folder or p.name != "__init__.py"
        )
        if layer == "library":
            modules = ["__init__.py"]
        srcs = _srcs(attrs)
        assert sorted(srcs) == modules, (
            f"{layer}: not listed: {sorted(set(modules) - set(srcs))}; "
            f"listed but missing: {sorted(set(srcs) - set(modules))}"
        )
        assert sorted(attrs.get("deps", [])) == sorted(deps), layer


@pytest.mark.parametrize("test_file", TEST_FILES, ids=[p.name for p in TEST_FILES])
def test_every_test_file_has_its_py_test(test_file):
    # A py_test named like the file, running the shared runner on exactly that file.
    targets = {attrs.get("name"): attrs for rule, attrs in _targets(ROOT / "tests" / "BUILD")}
    attrs = targets.get(test_file.stem)
    assert attrs is not None, f"tests/BUILD has no py_test named {test_file.stem!r}."
    assert sorted(_srcs(attrs)) == sorted([RUNNER, test_file.name])
    assert attrs.get("main") == RUNNER
    assert f"$(rootpath {test_file.name})" in (attrs.get("args") or [])
    assert attrs.get("size") in ("small", "medium", "large", "enormous")
    # Slow multi-process tests carry the e2e tag, and only they do.
    marked = bool(E2E_MARK.search(test_file.read_text()))
    assert ("e2e" in (attrs.get("tags") or [])) == marked


def test_every_py_test_names_an_existing_test_file():
    names = {p.name for p in TEST_FILES}
    listed = {
        src
        for rule, attrs in _targets(ROOT / "tests" / "BUILD")
        if rule == "py_test"
        for src in _srcs(attrs)
        if src != RUNNER
    }
    assert listed <= names, f"py_tests of missing files: {sorted(listed - names)}"


def test_runner_passes_bazel_filter_and_report_to_pytest():
    environ = {"TESTBRIDGE_TEST_ONLY": "placement", "XML_OUTPUT_FILE": "/out/test.xml"}
    assert pytest_args(["tests/test_hook.py"], environ) == [
        "-p",
        "no:cacheprovider",
        "tests/test_hook.py",
        "-k",
        "placement",
        "--junitxml=/out/test.xml",
    ]


def test_runner_needs_a_test_file():
    with pytest.raises(ValueError, match=r"Supplied arguments: \['-x'\]"):
        pytest_args(["-x"], {})
