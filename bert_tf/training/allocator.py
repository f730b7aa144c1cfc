"""Fewer glibc malloc arenas for a long training process, so its memory stays flat.

glibc lets threads that contend for the allocator open arenas of their own, up
to eight per core, and memory freed into one arena serves only that arena's
later requests. TensorFlow's op and input-pipeline threads allocate and free
tensors across many such arenas; over a 3,000-step BERT-tiny pretraining on 2
cores the trainer's anonymous memory kept growing (+8.9 % from step 500 to the
end), and with one arena per core it stayed flat (`research/records/benchmarks/
memory_curve`). A `MALLOC_ARENA_MAX` set in the environment is left as it is.
"""

import ctypes
import os

# glibc's mallopt() parameter for the arena limit (malloc.h).
_M_ARENA_MAX = -8


def limit_malloc_arenas() -> bool:
    """Caps glibc's malloc arenas at one per core (at least 2); True when applied.

    Call it first thing in a process, before any thread allocates: glibc fixes
    the limit when it first needs a new arena. Does nothing (and returns False)
    when `MALLOC_ARENA_MAX` is set or the C library has no `mallopt` (macOS, for one).
    """
    if os.environ.get("MALLOC_ARENA_MAX"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    arenas = max(2, os.cpu_count() or 1)
    return bool(mallopt(_M_ARENA_MAX, arenas))
