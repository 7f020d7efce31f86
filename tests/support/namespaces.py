"""Local mode's private network namespace in tests: Linux only, and an `unshare` that refuses.

The tests are tests/subprocess/test_isolation_subprocess.py and
tests/e2e/test_isolation_e2e.py (runner/isolation.py).
"""

import stat
import sys

import pytest

# The mark of the tests of namespaces, which only Linux has.
LINUX = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux")


# An `unshare` that fails as where namespaces are not allowed: what it says, and code 1.
REFUSING_UNSHARE = (
    "#!/bin/sh\necho 'unshare: unshare failed: Operation not permitted' >&2\nexit 1\n"
)


def refusing_unshare(folder):
    """Writes an `unshare` into `folder` that fails as where namespaces are not allowed.

    Returns:
        `folder`, to put first on PATH.
    """
    path = folder / "unshare"
    path.write_text(REFUSING_UNSHARE)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return folder
