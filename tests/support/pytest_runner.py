"""Runs pytest under `bazel test`: the `main` of every py_test in tests/BUILD.

Each py_test passes its test file, e.g. `args = ["$(rootpath test_hook.py)"]`, and runs
from the workspace root of its runfiles tree, which mirrors the checkout. pytest reads
its settings from the pyproject.toml found there (a `data` dependency of the test).

The runner maps Bazel's test protocol onto pytest: `--test_filter=EXPR` becomes
`-k EXPR`, and the per-test-case report goes to the JUnit XML file Bazel asks for.
"""

import os
import sys

import pytest


def pytest_args(argv, environ):
    """The pytest command line for one Bazel test.

    Args:
        argv: The arguments of the py_test (test files, optional pytest flags).
        environ: The environment Bazel gives the test.

    Returns:
        A list of arguments for `pytest.main`.

    Raises:
        ValueError: If `argv` names no test file.
    """
    if not any(arg.endswith(".py") for arg in argv):
        raise ValueError(
            f"Pass the test file to run, e.g. args = ['$(rootpath test_x.py)']. "
            f"Supplied arguments: {argv}"
        )
    # The runfiles tree is Bazel's output; pytest writes no cache into it.
    args = ["-p", "no:cacheprovider", *argv]
    if environ.get("TESTBRIDGE_TEST_ONLY"):
        args += ["-k", environ["TESTBRIDGE_TEST_ONLY"]]
    if environ.get("XML_OUTPUT_FILE"):
        args.append(f"--junitxml={environ['XML_OUTPUT_FILE']}")
    return args


def main():
    """Runs pytest and exits with its status (0 only when all collected tests pass)."""
    sys.exit(pytest.main(pytest_args(sys.argv[1:], os.environ)))


if __name__ == "__main__":
    main()
