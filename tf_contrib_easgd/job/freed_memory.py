"""Keeps the C allocator from handing an exchange's buffers back to the kernel after each use.

An exchange allocates buffers the size of the model on both sides (gRPC's receive
buffers, the tensors received, their differences). glibc's malloc serves such large
blocks with `mmap` and unmaps them when they are freed, so the next exchange faults every
page in again and the kernel zeroes each one: measured here, some 3,700 page faults and a
third of the process CPU of an exchange of an 11.7 MB model. `reuse_freed_memory` raises
glibc's thresholds so that those blocks stay in the heap and are reused.
docs/DESIGN.md ("The exchange at the floor of the runtime").
"""

import ctypes
import ctypes.util
import numbers

# mallopt(3) parameters.
_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3
#: glibc's largest mmap threshold on 64-bit machines: blocks above it are still mapped.
MMAP_THRESHOLD_MAX_BYTES = 32 * 1024 * 1024
#: How much more than it needs the heap asks the kernel for at a time.
TOP_PAD_BYTES = 64 * 1024 * 1024
#: How much freed memory the heap keeps by default before it returns any to the kernel.
KEEP_MB = 1024


def environment(keep_mb=KEEP_MB):
    """The environment variables that give a process started with them the settings of
    `reuse_freed_memory(keep_mb)`: glibc reads them when the process starts. For launchers,
    which set up a process before it runs; e.g. a process of another Python (TensorFlow
    1.15's) that cannot import this package."""
    return {
        "MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD_MAX_BYTES),
        "MALLOC_TRIM_THRESHOLD_": str(keep_mb * 1024 * 1024),
        "MALLOC_TOP_PAD_": str(TOP_PAD_BYTES),
    }


def reuse_freed_memory(keep_mb=KEEP_MB):
    """Makes this process's C allocator keep freed large blocks for reuse.

    Call it once, early (before the first exchange; before TensorFlow is imported is
    best), in every process of a job: the parameter servers too. It sets glibc's mmap
    threshold to its maximum (blocks up to 32 MB come from the heap), and lets the heap
    keep up to `keep_mb` of freed memory instead of returning it, so the resident size of
    the process may stay up to that much above what it uses. Elsewhere than on glibc
    (musl, macOS) it does nothing.

    Args:
        keep_mb: freed memory, in MB, the heap may keep before it returns any; >= 0.

    Returns:
        True if the allocator was tuned, False if this C library offers no `mallopt`.

    Raises:
        TypeError, ValueError: if `keep_mb` is not an int >= 0.
    """
    # No TensorFlow here (the library's checks import it): this runs before its import.
    if isinstance(keep_mb, bool) or not isinstance(keep_mb, numbers.Integral):
        raise TypeError(
            f"keep_mb must be an int, got {keep_mb!r} of type {type(keep_mb).__name__}."
        )
    if keep_mb < 0:
        raise ValueError(f"keep_mb must be >= 0, got {keep_mb!r}.")
    mallopt = _glibc_mallopt()
    if mallopt is None:
        return False
    settings = (
        (_M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX_BYTES),
        (_M_TRIM_THRESHOLD, keep_mb * 1024 * 1024),
        (_M_TOP_PAD, TOP_PAD_BYTES),
    )
    return all(mallopt(parameter, value) == 1 for parameter, value in settings)


def _glibc_mallopt():
    """glibc's `mallopt`, or None where the C library is not glibc."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        libc.gnu_get_libc_version  # noqa: B018 (only glibc has it)
    except (OSError, AttributeError):
        return None
    mallopt = libc.mallopt
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return mallopt
