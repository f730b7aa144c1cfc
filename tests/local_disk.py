"""A check that code given only `ram://` paths wrote nothing to the local disk.

`LocalDiskGuard` moves the working directory and the temporary directory
(`TMPDIR`, `tempfile.tempdir`) into two empty folders; `check` asserts they
are still empty, and that no file or folder named like a scheme (`ram:...`,
what a bare `open("ram://run/x")` or `os.makedirs` leaves) appeared in the
repository or beside the two folders.
"""

import os
import pathlib
import tempfile

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# AutoGraph caches the Python it generates from our functions in the temporary
# directory: code, no run data.
_AUTOGRAPH_PREFIX = "__autograph_generated_file"


def entries_named_like_a_scheme(*roots):
    """Local paths whose name starts with `ram:` under `roots` (a split run leaves one)."""
    found = []
    for root in roots:
        for folder, names, files in os.walk(root):
            names[:] = [name for name in names if name not in (".git", "__pycache__")]
            found += [os.path.join(folder, name) for name in names + files
                      if name.startswith("ram:")]
    return found


class LocalDiskGuard:
    """An empty working and temporary directory, for as long as `patch` is active.

    Args:
      root: a fresh local folder; the two directories are made in it.
      patch: the `pytest.MonkeyPatch` that holds the changes (undone with it).
    """

    def __init__(self, root: pathlib.Path, patch: pytest.MonkeyPatch):
        self.root = root
        self.cwd, self.temporary = root / "cwd", root / "tmp"
        self.cwd.mkdir()
        self.temporary.mkdir()
        patch.chdir(self.cwd)
        patch.setenv("TMPDIR", str(self.temporary))
        patch.setattr(tempfile, "tempdir", str(self.temporary))

    def check(self):
        """Asserts that nothing was written locally so far."""
        assert not os.listdir(self.cwd), os.listdir(self.cwd)
        written = [name for name in os.listdir(self.temporary)
                   if not name.startswith(_AUTOGRAPH_PREFIX)]
        assert not written, written
        found = entries_named_like_a_scheme(REPO, str(self.root))
        assert not found, found
