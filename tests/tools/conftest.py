"""The tools tier: easgd-migrate, the benchmarks' harness, the soak, docs, BUILD files, the matrix.

Marks every test of this folder `tools` (tests/README.md: the tiers).
"""

import pathlib

from tiers import mark_folder


def pytest_collection_modifyitems(items):
    mark_folder(items, pathlib.Path(__file__).parent, "tools")
