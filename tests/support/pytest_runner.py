"""Runs pytest under `bazel test`: the `main` of every py_test of tests/tiers.bzl.

Each py_test passes its test files, e.g. `args = ["$(rootpath test_hook.py)"]`, and runs
from the workspace root of its runfiles tree, which mirrors the checkout. pytest reads
its settings from the pyproject.toml found there (a `data` dependency of the test).

The runner maps Bazel's test protocol onto pytest: `--test_filter=EXPR` becomes
`-k EXPR`, the per-test-case report goes to the JUnit XML file Bazel asks for, and a
sharded py_test (`shard_count`) runs in each shard the files dealt to it.
"""

import os
import pathlib
import sys

import pytest

#: pytest's exit status when it collected (or selected) no test.
NO_TESTS_COLLECTED = 5


def shard_of(environ):
    """This process's shard of a sharded py_test.

    Args:
        environ: The environment Bazel gives the test.

    Returns:
        (index, total) from TEST_SHARD_INDEX and TEST_TOTAL_SHARDS, or None when the test
        is not sharded (no TEST_TOTAL_SHARDS, or 1).

    Raises:
        ValueError: If the two variables are not integers with 0 <= index < total.
    """
    total = environ.get("TEST_TOTAL_SHARDS")
    if total is None:
        return None
    index = environ.get("TEST_SHARD_INDEX")
    try:
        total, index = int(total), int(index)
    except (TypeError, ValueError):
        total = index = None
    if total is None or not 0 <= index < total:
        raise ValueError(
            "TEST_SHARD_INDEX must be an integer in [0, TEST_TOTAL_SHARDS), got "
            f"TEST_SHARD_INDEX={environ.get('TEST_SHARD_INDEX')!r}, "
            f"TEST_TOTAL_SHARDS={environ.get('TEST_TOTAL_SHARDS')!r}"
        )
    return None if total == 1 else (index, total)


def shard_files(files, shard):
    """The test files a shard runs: the sorted files dealt round-robin.

    A file goes to one shard whole, so that its module-scoped fixtures (an in-process
    cluster) are set up in one process only. The deal depends on the file names alone.

    Args:
        files: The test files of the py_test.
        shard: (index, total) of `shard_of`, or None for all the files.

    Returns:
        The shard's files, sorted; empty when there are more shards than files.
    """
    files = sorted(files)
    if shard is None:
        return files
    index, total = shard
    return files[index::total]


def pytest_args(argv, environ):
    """The pytest command line for one Bazel test, or its shard.

    Args:
        argv: The arguments of the py_test (test files, optional pytest flags).
        environ: The environment Bazel gives the test.

    Returns:
        A list of arguments for `pytest.main`, or None when the shard got no test file.

    Raises:
        ValueError: If `argv` names no test file.
    """
    files = [arg for arg in argv if arg.endswith(".py")]
    if not files:
        raise ValueError(
            f"Pass the test file to run, e.g. args = ['$(rootpath test_x.py)']. "
            f"Supplied arguments: {argv}"
        )
    selected = shard_files(files, shard_of(environ))
    if not selected:
        return None
    flags = [arg for arg in argv if not arg.endswith(".py")]
    # The runfiles tree is Bazel's output; pytest writes no cache into it.
    args = ["-p", "no:cacheprovider", *flags, *selected]
    if environ.get("TESTBRIDGE_TEST_ONLY"):
        args += ["-k", environ["TESTBRIDGE_TEST_ONLY"]]
    if environ.get("XML_OUTPUT_FILE"):
        args.append(f"--junitxml={environ['XML_OUTPUT_FILE']}")
    return args


def exit_status(status, environ):
    """The test's exit status for pytest's `status`.

    In a shard, "no tests collected" passes: another shard may hold what a
    `--test_filter` selects. Unsharded, it fails, as a filter that matches nothing should.

    Args:
        status: pytest's exit status.
        environ: The environment Bazel gives the test.

    Returns:
        0 or `status`.
    """
    if status == NO_TESTS_COLLECTED and shard_of(environ) is not None:
        return 0
    return int(status)


def run(argv, environ):
    """Runs the test's files (its shard's) under pytest.

    Args:
        argv: The arguments of the py_test.
        environ: The environment Bazel gives the test.

    Returns:
        The exit status: 0 only when all collected tests pass.
    """
    if environ.get("TEST_SHARD_STATUS_FILE"):
        # Tells Bazel that the runner honours sharding.
        pathlib.Path(environ["TEST_SHARD_STATUS_FILE"]).touch()
    args = pytest_args(argv, environ)
    if args is None:
        index, total = shard_of(environ)
        print(f"Shard {index} of {total}: no test file (more shards than files).")
        return 0
    return exit_status(pytest.main(args), environ)


def main():
    """Runs pytest and exits with the test's status."""
    sys.exit(run(sys.argv[1:], os.environ))


if __name__ == "__main__":
    main()
