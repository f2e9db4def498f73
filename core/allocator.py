"""Keep the memory a training step frees for the next step, instead of handing it back to the OS (glibc only).

A decoder step allocates and frees tensors of several MB at every word, and the whole step's memory is freed
and allocated again at every batch. glibc's malloc serves blocks above its mmap threshold (128 KiB, raised only
as far as the largest block freed so far) with fresh `mmap` pages and returns them on free, and trims the top of
its heap whenever more than twice that is free. Either way the next allocation starts from pages the kernel
must fault in and zero one by one: up to a tenth of a bfloat16 training step, and more at 14x14
(`benchmarks/README.md`). Telling malloc to keep such blocks in its heap and never trim it lets every step reuse
the previous step's pages. The price is that the process keeps its peak footprint until it exits, which a
training run, a benchmark or the app reaches within its first steps anyway.

PyTorch's CPU tuning guide reaches the same end by preloading another allocator (jemalloc, tcmalloc); this
needs no extra library. It is a process-wide setting, so it is made by the entry points (`python -m captioning`,
`python -m vqa`, `demo.py`, the benchmarks), never by importing the package. A user who sets glibc's own
variables (`MALLOC_MMAP_THRESHOLD_` and the like, or `GLIBC_TUNABLES`) keeps them.
"""

from __future__ import annotations

import ctypes
import os
import platform

# mallopt's parameter numbers, from glibc's <malloc.h>
M_TRIM_THRESHOLD = -1
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3

MMAP_THRESHOLD = 1 << 30  # blocks below 1 GiB come from the heap: every tensor of a step, a 14x14 batch included
TRIM_THRESHOLD = 2**31 - 1  # trim the heap's top only when 2 GiB lie free there (mallopt takes a C int)
TOP_PAD = 64 << 20  # grow the heap 64 MiB beyond each request, so it grows in a few steps, not at every one

USER_SETTINGS = (
    "MALLOC_MMAP_THRESHOLD_",
    "MALLOC_TRIM_THRESHOLD_",
    "MALLOC_TOP_PAD_",
    "MALLOC_MMAP_MAX_",
    "GLIBC_TUNABLES",
)


def keep_freed_memory() -> bool:
    """Set glibc's malloc to keep freed memory for reuse; returns whether it did.

    It does nothing (and returns False) off glibc (macOS, Windows, musl) and when the user has set malloc's
    variables. Calling it again is harmless.
    """
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    if any(name in os.environ for name in USER_SETTINGS):
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    settings = ((M_MMAP_THRESHOLD, MMAP_THRESHOLD), (M_TRIM_THRESHOLD, TRIM_THRESHOLD), (M_TOP_PAD, TOP_PAD))
    return all(mallopt(parameter, value) == 1 for parameter, value in settings)
