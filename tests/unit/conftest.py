"""The unit tier: graphs and functions in this process; no server, no child process.

Marks every test of this folder `unit` (tests/README.md: the tiers).
"""

import pathlib

from tiers import mark_folder


def pytest_collection_modifyitems(items):
    mark_folder(items, pathlib.Path(__file__).parent, "unit")
