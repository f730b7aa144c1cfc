"""Numbered SavedModel versions under a model's export base, written atomically.

TF Serving watches `EXPORTS/NAME/` and serves the highest numeric
subdirectory. A local version is written into a hidden, non-numeric
temporary directory next to it and renamed into place, so the server never
sees a half-written version and a crash leaves only a temporary directory
behind. On object storage (`gs://...`) a directory rename is a copy of every
object, one by one, so it would not hide a half-written version either: the
version is written under its final name once, and removed if writing fails.
"""

import contextlib
import os
import uuid

from bert_tf import storage


def existing_versions(export_base):
    """The integer versions present under `export_base`, sorted."""
    if not storage.isdir(export_base):
        return []
    return sorted(int(name) for name in storage.listdir(export_base)
                  if name.isdigit() and storage.isdir(os.path.join(export_base, name)))


def next_version(export_base):
    """One more than the highest existing version (1 for a new base)."""
    versions = existing_versions(export_base)
    return versions[-1] + 1 if versions else 1


@contextlib.contextmanager
def atomic_version_dir(export_base, version=None):
    """Yields (dir to write, final path); renames on success, removes on error.

    On object storage the dir to write is the final path itself.

    Raises:
      ValueError: `version` is not a positive integer.
      FileExistsError: the version already exists (it is left untouched).
    """
    if version is None:
        version = next_version(export_base)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError(f"export version must be a positive integer, got {version!r}")
    final = os.path.join(export_base, str(version))
    if storage.exists(final):
        raise FileExistsError(
            f"export version {final} already exists; pick another --version or remove it")
    storage.makedirs(export_base, exist_ok=True)
    if storage.has_scheme(export_base):
        try:
            yield final, final
        except BaseException:
            if storage.exists(final):
                storage.rmtree(final)
            raise
        return
    temporary = os.path.join(export_base, f".tmp-{version}-{uuid.uuid4().hex}")
    try:
        yield temporary, final
        if storage.exists(final):  # another writer won the race
            raise FileExistsError(f"export version {final} appeared while exporting")
        storage.rename(temporary, final)
    finally:
        if storage.exists(temporary):
            storage.rmtree(temporary)
