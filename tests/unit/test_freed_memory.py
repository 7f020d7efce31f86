"""`reuse_freed_memory`: large blocks freed stay in the heap, so their pages fault in once.

Measured in fresh interpreters (the setting is process-wide): a loop that allocates three
16 MB blocks, writes every page of each and frees them all, 20 times.
"""

import pytest

import tf_contrib_easgd


@pytest.mark.parametrize(
    ("keep_mb", "error", "message"),
    [
        (-1, ValueError, r"keep_mb must be >= 0, got -1"),
        (1.5, TypeError, r"keep_mb must be an int, got 1.5 of type float"),
        (True, TypeError, r"keep_mb must be an int, got True of type bool"),
    ],
)
def test_bad_keep_mb_is_refused(keep_mb, error, message):
    with pytest.raises(error, match=message):
        tf_contrib_easgd.reuse_freed_memory(keep_mb)
