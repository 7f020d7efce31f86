"""The cluster tier: in-process tf.compat.v1.train.Servers on loopback ports, no job.

Marks every test of this folder `cluster` (tests/README.md: the tiers).
"""

import pathlib

from tiers import mark_folder


def pytest_collection_modifyitems(items):
    mark_folder(items, pathlib.Path(__file__).parent, "cluster")
