"""The training commands cap glibc's malloc arenas, unless the environment already does."""

import os
import platform
import subprocess
import sys

import pytest

CALL = "from bert_tf.training import allocator; print(allocator.limit_malloc_arenas())"


def _limit_in_fresh_process(**env):
    # A process of its own: the limit must be set before any thread allocates.
    environment = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    result = subprocess.run([sys.executable, "-c", CALL], env={**environment, **env},
                            capture_output=True, text=True, timeout=60, check=True)
    return result.stdout.strip()


def test_the_arena_limit_applies_where_the_c_library_is_glibc():
    expected = platform.libc_ver()[0] == "glibc"
    assert _limit_in_fresh_process() == str(expected)


@pytest.mark.parametrize("setting", ["1", "16"])
def test_a_limit_set_in_the_environment_is_left_alone(setting):
    assert _limit_in_fresh_process(MALLOC_ARENA_MAX=setting) == "False"
