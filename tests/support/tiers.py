"""A tier's marker for the tests of its folder: what each folder's conftest.py calls.

pytest calls `pytest_collection_modifyitems` of every conftest.py with all the items of
the session, so each folder marks only the items under it.
"""

import pathlib


def mark_folder(items, folder, marker):
    """Adds `marker` to the items whose file lies under `folder`.

    Args:
        items: The collected pytest items.
        folder: The tier's folder (a path).
        marker: The name of a marker registered in pyproject.toml.
    """
    folder = pathlib.Path(folder).resolve()
    for item in items:
        if folder in pathlib.Path(item.path).resolve().parents:
            item.add_marker(marker)
