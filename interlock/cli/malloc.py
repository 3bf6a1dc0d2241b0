"""glibc's malloc told to keep large blocks out of its heap, for the serving subcommands.

The soak (``benchmarks/soak.py``, ``docs/reliability.md`` "Soak") measured the controller's RSS
growing about 15 MiB an hour under steady churn with the Python heap flat: glibc's *free* bytes
grew (mallinfo2 ``fordblks``, 1.4 MiB at the start, 11.6 after 42 minutes), in holes of its heap
it could not give back. glibc serves a request above ``M_MMAP_THRESHOLD`` (128 KiB) with its own
mmap and returns it on free, but each time such a block is freed it raises the threshold to that
size (up to 32 MiB), so from then on the large, short-lived buffers (a watch event's or a list's
JSON, a response body) are carved out of the heap between long-lived small blocks and leave
holes. Setting the threshold explicitly turns that adjustment off (mallopt(3)); with it (the
same as ``MALLOC_MMAP_THRESHOLD_=131072``) the free bytes stayed flat in the soak.

Only glibc has ``mallopt`` with this meaning; elsewhere (musl, macOS) nothing is done, and an
operator who sets ``MALLOC_MMAP_THRESHOLD_`` keeps their value.
"""

from __future__ import annotations

import ctypes
import os

M_MMAP_THRESHOLD = -3
"""``mallopt``'s parameter number for the threshold (glibc's malloc.h)."""
MMAP_THRESHOLD = 128 * 1024
"""glibc's initial threshold, kept for good."""
ENV = "MALLOC_MMAP_THRESHOLD_"


def pin_mmap_threshold() -> bool:
    """Fix glibc's mmap threshold at 128 KiB; whether it was set (False when not glibc, or
    when ``MALLOC_MMAP_THRESHOLD_`` already says what the operator wants)."""
    if ENV in os.environ or not _is_glibc():
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))


def _is_glibc() -> bool:
    confstr = getattr(os, "confstr", None)
    try:
        return confstr is not None and confstr("CS_GNU_LIBC_VERSION") is not None
    except (ValueError, OSError):
        return False


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd",
            "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


def malloc_statistics() -> dict[str, int]:
    """glibc's ``mallinfo2()`` in bytes: ``arena`` (the heaps' size), ``in_use``, ``free`` (held
    by malloc but free: holes when it grows), ``mmapped`` (blocks on their own mmap), ``top``
    (what a trim could give back at the heap's top); empty when not glibc >= 2.33."""
    if not _is_glibc():
        return {}
    function = getattr(ctypes.CDLL(None), "mallinfo2", None)
    if function is None:
        return {}
    function.restype = _MallInfo2
    info = function()
    return {
        "arena": info.arena,
        "in_use": info.uordblks,
        "free": info.fordblks,
        "mmapped": info.hblkhd,
        "top": info.keepcost,
    }
