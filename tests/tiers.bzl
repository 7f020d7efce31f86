"""The py_tests of one tier's folder under tests/ (tests/README.md describes the tiers).

A folder's BUILD is one call, e.g. `tier_tests(tier = "unit", shards = 2, sizes = {...})`.
Its `test_*.py` files (globbed, not listed) run in one py_test named like the tier
(//tests/unit:unit), one pytest session per shard, so that TensorFlow is imported once a
shard rather than once a file; the runner (tests/support/pytest_runner.py) deals the files
to Bazel's shards. A file that one session cannot hold with the others has a py_test of
its own, named like the file: one named in `needs`, `args` or `tags`, or in a group.
`shards = 0` gives every file its own py_test (tests/e2e: each is long and starts its own
processes). Tags come from the tier; what a folder writes by hand is what differs from
the tier's defaults. tests/tools/test_build_files.py checks the calls.
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
# medium 300 s, large 900 s, enormous 3600 s), per shard for a sharded target: the
# smallest at least 3x the target's (or shard's) time under `bazel test` on a 2-core
# machine, and above the test's own deadlines, so that a hanging test reports itself
# before Bazel kills it.
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

def _unique(labels):
    """`labels` without repeats, in their first order."""
    seen = []
    for label in labels:
        if label not in seen:
            seen.append(label)
    return seen

def tier_tests(
        tier,
        shards,
        sizes = {},
        groups = {},
        needs = {},
        data = {},
        deps = {},
        args = {},
        tags = {}):
    """The tier's shared py_test in `shards` shards, and the py_tests of files apart.

    Args:
      tier: The folder's tier, a key of TIER_TAGS (the folder's name).
      shards: Shards of the shared py_test, named like the tier (Bazel's shard_count; 1:
        one unsharded py_test); 0: no shared py_test, one per file or group.
      sizes: {target: size} where it differs from DEFAULT_SIZES[tier]: the tier's name
        for the shared py_test, a file's for a file apart.
      groups: {target: [test files]}: files run by one py_test of their own (one pytest
        session), apart from the shared one; a group of one file keeps a file that cannot
        share a session apart.
      needs: {file: [names of NEEDS]}: tags of files whose tests carry those markers; such
        a file has a py_test of its own, so that --test_tag_filters=-root leaves out just
        it.
      data: {file or target: [labels]}: files its tests read; a shared file's go to the
        shared py_test.
      deps: {file or target: [labels]}: libraries beyond the tests' conftest and helpers;
        a shared file's go to the shared py_test.
      args: {file: [pytest flags]}: put before its test files; it has a py_test of its own.
      tags: {file: [tags]}: further tags (e.g. "external"); it has a py_test of its own.
    """
    if tier not in TIER_TAGS:
        fail("tier must be one of %s, got %r" % (sorted(TIER_TAGS), tier))
    if type(shards) != "int" or shards < 0:
        fail("shards must be an int >= 0 (0: a py_test per file), got %r" % (shards,))
    grouped = [name for files in groups.values() for name in files]
    files = {
        name[:-len(".py")]: [name]
        for name in sorted(native.glob(["test_*.py"]))
        if name not in grouped
    }
    for group, members in groups.items():
        if group in files or group == tier:
            fail("group %r is also the name of a test file or of the tier" % group)
        files[group] = members
    apart = {
        name: members
        for name, members in files.items()
        if shards == 0 or name in groups or name in needs or name in args or name in tags
    }
    shared = [name for name in files if name not in apart]
    for attribute, given in [
        ("needs", needs),
        ("data", data),
        ("deps", deps),
        ("args", args),
        ("tags", tags),
    ]:
        for name in given:
            if name not in files:
                fail("%s names %r, not a test file of tests/%s" % (attribute, name, tier))
    for name in sizes:
        if name not in apart and not (name == tier and shared):
            fail("sizes names %r, not a target of tests/%s: %s" % (
                name,
                tier,
                sorted(apart) + ([tier] if shared else []),
            ))
    for name, needed in needs.items():
        for need in needed:
            if need not in NEEDS:
                fail("needs[%r]: %r is none of %s" % (name, need, NEEDS))
    targets = [
        (name, members, data.get(name, []), deps.get(name, []))
        for name, members in apart.items()
    ]
    if shared:
        targets.append((
            tier,
            [test_file for name in shared for test_file in files[name]],
            _unique([label for name in shared for label in data.get(name, [])]),
            _unique([label for name in shared for label in deps.get(name, [])]),
        ))
    for name, members, target_data, target_deps in targets:
        native.py_test(
            name = name,
            size = sizes.get(name, DEFAULT_SIZES[tier]),
            shard_count = shards if name == tier and shards > 1 else None,
            srcs = [RUNNER, "conftest.py"] + members,
            main = RUNNER,
            args = args.get(name, []) + ["$(rootpath %s)" % test_file for test_file in members],
            data = ["//:pyproject.toml"] + target_data,
            tags = TIER_TAGS[tier] + needs.get(name, []) + tags.get(name, []),
            deps = ["//tests:conftest"] + target_deps,
        )
