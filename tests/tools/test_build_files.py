"""The Bazel build: BUILD files list every Python file, and the tiers' py_tests.

`make test` (pytest) finds files by itself; Bazel runs only what a BUILD file lists. These
checks fail as soon as a module, test, benchmark or example exists that no BUILD target
lists, so the two suites cannot drift apart. They parse the BUILD files as Python syntax
(Starlark is a subset of it), need no Bazel and no TensorFlow, and take well under a second.
Source lists must be literal lists of file names; a `glob()` counts as listing nothing, but
for the `tier_tests` macro of tests/tiers.bzl, which globs a tier folder's `test_*.py`
(the py_tests it makes them into are worked out here as it does). The runner's tests are
in test_pytest_runner.py.

Under `bazel test` the files are symlinks into the checkout, and `ROOT` resolves to it.
"""

import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = "tf_contrib_easgd"
TESTS = ROOT / "tests"
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
MACRO = "tier_tests"
NEEDS_MARK = re.compile(r"\bmark\.(root|netns|slurm)\b")
TIER_MARK = re.compile(r"\bmark\.(unit|cluster|subprocess|e2e|tools)\b")
#: The tier markers a test file may write itself (its folder's conftest.py adds the
#: folder's): the oracle's files keep `cluster` (their processes run in-process clusters),
#: tools tests that start a child say `subprocess`.
WRITTEN_MARKS = {"e2e": {"e2e", "cluster"}, "tools": {"subprocess"}}


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
TEST_FILES = sorted(TESTS.rglob("test_*.py"))


def _macro_calls(build_file):
    """The keyword arguments of each `tier_tests(...)` call of a BUILD file."""
    tree = ast.parse(build_file.read_text(), filename=str(build_file))
    return [
        {keyword.arg: ast.literal_eval(keyword.value) for keyword in node.keywords}
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == MACRO
    ]


def _bzl_constants():
    """The literal top-level constants of tests/tiers.bzl (TIER_TAGS, DEFAULT_SIZES, ...)."""
    tree = ast.parse((TESTS / "tiers.bzl").read_text())
    return {
        node.targets[0].id: ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
    }


BZL = _bzl_constants()
TIERS = sorted(BZL["TIER_TAGS"])


def _tier_targets(tier):
    """The `tier_tests` call of tests/<tier>/BUILD and the py_tests it makes.

    As tests/tiers.bzl lays them out: a file named in `needs`, `args` or `tags` and each
    group have a py_test of their own; the other files share one named like the tier,
    unless `shards` is 0 (a py_test per file).

    Returns:
        (call, files, targets): the call's keyword arguments; {file's target name: [test
        files]} (a group's name for its files); {py_test: [test files]}.
    """
    calls = _macro_calls(TESTS / tier / "BUILD")
    assert len(calls) == 1, f"tests/{tier}/BUILD: one {MACRO}() call, found {len(calls)}."
    call = calls[0]
    groups = call.get("groups", {})
    grouped = [name for files in groups.values() for name in files]
    assert len(grouped) == len(set(grouped)), f"tests/{tier}: a file in two groups"
    files = {
        path.stem: [path.name]
        for path in sorted((TESTS / tier).glob("test_*.py"))
        if path.name not in grouped
    }
    files.update(groups)
    apart = set(groups)
    apart.update(*(call.get(attribute, {}) for attribute in ("needs", "args", "tags")))
    targets = {
        name: members for name, members in files.items() if call.get("shards") == 0 or name in apart
    }
    shared = [test_file for name in files if name not in targets for test_file in files[name]]
    if shared:
        targets[tier] = shared
    return call, files, targets


def _target_of(test_file):
    call, _, targets = _tier_targets(test_file.parent.name)
    name = next(name for name, files in targets.items() if test_file.name in files)
    return call, name, [test_file.parent / other for other in targets[name]]


@pytest.mark.parametrize(("folder", "path"), SOURCES, ids=[_case(p) for _, p in SOURCES])
def test_every_python_file_is_listed_by_a_target(folder, path):
    build_file = _owning_build_file(path, folder)
    assert build_file, f"{_case(path)}: no BUILD file in {folder}/ (see docs/BAZEL.md)."
    name = path.relative_to(build_file.parent).as_posix()
    rules = SOURCE_FOLDERS[folder]
    listed = any(rule in rules and name in _srcs(attrs) for rule, attrs in _targets(build_file))
    # tier_tests globs the folder's test files and puts its conftest.py in every py_test.
    globbed = name.startswith("test_") or name == "conftest.py"
    listed = listed or (globbed and "/" not in name and bool(_macro_calls(build_file)))
    assert listed, (
        f"{_case(path)} is in no srcs list of a {' or '.join(rules)} in "
        f"{_case(build_file)}; add it there (see docs/BAZEL.md)."
    )


#: The package's targets and what they list: the library's wings (the algorithm is the
#: package folder's modules but `__init__.py`, which the `library` target lists), its
#: programs (the trainer's runner on the trainer). Each with the targets it depends on, as
#: tests/unit/test_layers.py has the wings and the programs.
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
    "runner": (("runner/",), (":trainer",)),
    "migrate": (("migrate/",), (":library",)),
}
PUBLIC = ("library", "trainer", "runner", "migrate")


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


def test_the_tiers_are_the_folders_of_tests():
    folders = sorted(
        path.name for path in TESTS.iterdir() if path.is_dir() and not path.name.startswith(".")
    )
    assert folders == sorted([*TIERS, "support"])
    assert BZL["TIER_TAGS"]["e2e"] == ["e2e"]
    assert all(not tags for tier, tags in BZL["TIER_TAGS"].items() if tier != "e2e")
    assert sorted(BZL["DEFAULT_SIZES"]) == TIERS
    assert BZL["NEEDS"] == ["root", "netns", "slurm"]


@pytest.mark.parametrize("test_file", TEST_FILES, ids=[_case(p) for p in TEST_FILES])
def test_every_test_file_is_in_a_tier_folder(test_file):
    assert test_file.parent.parent == TESTS and test_file.parent.name in TIERS, (
        f"{_case(test_file)}: a test file belongs in a tier's folder, tests/<tier>/, one of "
        f"{TIERS} (tests/README.md)."
    )


@pytest.mark.parametrize("tier", TIERS)
def test_each_tier_folder_marks_its_tests_and_calls_the_macro_once(tier):
    conftest = (TESTS / tier / "conftest.py").read_text()
    assert f'mark_folder(items, pathlib.Path(__file__).parent, "{tier}")' in conftest
    call, files, targets = _tier_targets(tier)
    assert call.get("tier") == tier
    shards = call.get("shards")
    assert isinstance(shards, int) and shards >= 0, f"tests/{tier}/BUILD: shards={shards!r}"
    for attribute in ("needs", "data", "deps", "args", "tags"):
        unknown = sorted(set(call.get(attribute, {})) - set(files))
        assert not unknown, f"tests/{tier}/BUILD: {attribute} names no test file: {unknown}"
    for group, members in call.get("groups", {}).items():
        assert group != tier and targets[group] == members
        assert all((TESTS / tier / name).is_file() for name in members), group
    sizes = call.get("sizes", {})
    # A shared file's time is its shard's: no size of its own (tests/tiers.bzl fails too).
    unknown = sorted(set(sizes) - set(targets))
    assert not unknown, f"tests/{tier}/BUILD: sizes names no target: {unknown}"
    assert set(sizes.values()) <= {"small", "medium", "large", "enormous"}


def test_e2e_files_have_targets_of_their_own_and_the_other_tiers_share():
    # An e2e file is long and starts its own processes; elsewhere start-up dominates.
    for tier in TIERS:
        call, files, targets = _tier_targets(tier)
        if tier == "e2e":
            assert call["shards"] == 0 and targets == files
        else:
            assert call["shards"] >= 1 and tier in targets, tier


@pytest.mark.parametrize("test_file", TEST_FILES, ids=[_case(p) for p in TEST_FILES])
def test_the_needs_of_a_target_are_the_markers_of_its_files(test_file):
    # root, netns and slurm: a tag on the target exactly when a marker in its files. A
    # file named in `needs` has a target of its own, so the tier's shared one needs none,
    # and --test_tag_filters=-root leaves out exactly the files that need root.
    call, name, files = _target_of(test_file)
    marked = {need for path in files for need in NEEDS_MARK.findall(path.read_text())}
    assert set(call.get("needs", {}).get(name, [])) == marked, (
        f"tests/{test_file.parent.name}/BUILD: needs[{name!r}] must be {sorted(marked)}, "
        f"the markers of its files (name {test_file.stem!r} in needs to give it a target "
        "of its own)"
    )


@pytest.mark.parametrize("test_file", TEST_FILES, ids=[_case(p) for p in TEST_FILES])
def test_a_test_file_writes_no_tier_marker_but_its_folders(test_file):
    tier = test_file.parent.name
    written = set(TIER_MARK.findall(test_file.read_text()))
    allowed = WRITTEN_MARKS.get(tier, set())
    assert written <= allowed, (
        f"{_case(test_file)} marks {sorted(written - allowed)}: its folder gives its tier "
        f"({tier}); a test of another tier goes in that tier's folder."
    )
