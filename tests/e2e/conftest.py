"""The e2e tier: real ps and worker OS processes; `make test` runs it alone, after the rest.

Marks every test of this folder `e2e` (tests/README.md: the tiers).
"""

import pathlib

from tiers import mark_folder


def pytest_collection_modifyitems(items):
    mark_folder(items, pathlib.Path(__file__).parent, "e2e")
