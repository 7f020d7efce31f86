"""The py_tests of one tier's folder under tests/ (tests/README.md describes the tiers).

A folder's BUILD is one call, e.g. `tier_tests(tier = "unit", sizes = {...})`: one py_test
per `test_*.py` of the folder (globbed, not listed), named like the file, each running the
shared runner (tests/support/pytest_runner.py) on its file. Tags come from the tier;
what a folder writes by hand is what differs from the tier's defaults, by target name.
tests/tools/test_build_files.py checks the calls.
"""

# Tags of every target of a tier. e2e: its tests start ps and worker OS processes, and
# --test_tag_filters=-e2e leaves them out. They run two at a time like the others
# (.bazelrc's --local_test_jobs=2), as under `make test`: a test's processes keep ~1.3 of 2
# cores busy on average, much of it TensorFlow's start-up and waits.
TIER_TAGS = {
    "unit": [],
    "cluster": [],
    "subprocess": [],
    "e2e": ["e2e"],
    "tools": [],
}

# The size of a target its folder gives none. size picks Bazel's timeout (small 60 s,
# medium 300 s, large 900 s, enormous 3600 s): the smallest at least 3x the file's time
# under `bazel test` on a 2-core machine, and above the test's own deadlines, so that a
# hanging test reports itself before Bazel kills it.
DEFAULT_SIZES = {
    "unit": "small",
    "cluster": "medium",
    "subprocess": "medium",
    "e2e": "large",
    "tools": "small",
}

# What a test may need of the machine, as pytest markers (pyproject.toml) and as tags.
NEEDS = ["root", "netns", "slurm"]

RUNNER = "//tests/support:pytest_runner.py"

def tier_tests(
        tier,
        sizes = {},
        groups = {},
        needs = {},
        data = {},
        deps = {},
        args = {},
        tags = {}):
    """One py_test per test_*.py of this folder, or per group of them.

    Args:
      tier: The folder's tier, a key of TIER_TAGS (the folder's name).
      sizes: {target: size} where it differs from DEFAULT_SIZES[tier].
      groups: {target: [test files]}: files run by one py_test (one pytest session), which
        then has no target of its own.
      needs: {target: [names of NEEDS]}: tags of targets whose tests carry those markers.
      data: {target: [labels]}: files a target reads.
      deps: {target: [labels]}: libraries beyond the tests' conftest and helpers.
      args: {target: [pytest flags]}: put before the test files.
      tags: {target: [tags]}: further tags (e.g. "external").
    """
    if tier not in TIER_TAGS:
        fail("tier must be one of %s, got %r" % (sorted(TIER_TAGS), tier))
    grouped = [name for files in groups.values() for name in files]
    targets = {
        name[:-len(".py")]: [name]
        for name in native.glob(["test_*.py"])
        if name not in grouped
    }
    for group, files in groups.items():
        if group in targets:
            fail("group %r is also the name of a test file's target" % group)
        targets[group] = files
    for attribute, given in [
        ("sizes", sizes),
        ("needs", needs),
        ("data", data),
        ("deps", deps),
        ("args", args),
        ("tags", tags),
    ]:
        for name in given:
            if name not in targets:
                fail("%s names %r, not a target of tests/%s" % (attribute, name, tier))
    for name, needed in needs.items():
        for need in needed:
            if need not in NEEDS:
                fail("needs[%r]: %r is none of %s" % (name, need, NEEDS))
    for name, files in targets.items():
        native.py_test(
            name = name,
            size = sizes.get(name, DEFAULT_SIZES[tier]),
            srcs = [RUNNER, "conftest.py"] + files,
            main = RUNNER,
            args = args.get(name, []) + ["$(rootpath %s)" % test_file for test_file in files],
            data = ["//:pyproject.toml"] + data.get(name, []),
            tags = TIER_TAGS[tier] + needs.get(name, []) + tags.get(name, []),
            deps = ["//tests:conftest"] + deps.get(name, []),
        )
