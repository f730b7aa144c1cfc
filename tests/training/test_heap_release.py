"""`HeapRelease`: freed heap memory goes back to the OS (glibc), throttled."""

import ctypes

from bert_tf.training.heap_release import HeapRelease


def _anonymous_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no RssAnon in /proc/self/status")


def test_release_returns_memory_that_malloc_kept():
    release = HeapRelease()
    assert release.available  # glibc on these machines
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    # 150 MB in 8 KB blocks (below the mmap threshold: they come from the heap),
    # touched so they are resident; then all freed but the newest, which pins the
    # top of the heap so free() alone cannot shrink it.
    blocks = [libc.malloc(8192) for _ in range(150 * 128)]
    for block in blocks:
        libc.memset(block, 1, 8192)
    for block in blocks[:-1]:
        libc.free(block)
    kept = _anonymous_mb()
    assert release(force=True)
    released = kept - _anonymous_mb()
    libc.free(blocks[-1])
    assert released > 100, f"only {released:.0f} MB of ~150 MB freed came back"


def test_unforced_releases_wait_for_the_interval(monkeypatch):
    calls = []
    release = HeapRelease(interval_seconds=60)
    monkeypatch.setattr(release, "_trim", calls.append)
    assert not release()  # constructed just now: not due
    assert release(force=True) and calls == [0]
    assert not release()
    release.interval_seconds = 0
    assert release() and calls == [0, 0]
