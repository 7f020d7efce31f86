"""The subprocess tier: a console script or a fresh interpreter as a child; no ps/worker job.

Marks every test of this folder `subprocess` (tests/README.md: the tiers).
"""

import pathlib

from tiers import mark_folder


def pytest_collection_modifyitems(items):
    mark_folder(items, pathlib.Path(__file__).parent, "subprocess")
