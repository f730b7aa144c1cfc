"""File access for every path a user gives: local paths and object storage alike.

A path with a scheme (`gs://bucket/run`, `ram://run`, `s3://...`) goes
through `tf.io.gfile`; any other path through Python's `open` and `os`, as
before. TensorFlow is imported only when a scheme path is touched, so the
commands and tools that read local run directories stay light.

Contracts:
  - Local paths behave exactly as `open`, `os`, `shutil` and `glob` do.
  - Scheme paths raise `FileNotFoundError` for a missing file or directory
    (not TensorFlow's `NotFoundError`), and `UnsupportedFileSystemError`
    (one line naming the path and what to install) for a scheme TensorFlow
    has no file system for.
  - `atomic_write` never leaves a half-written file under the final name:
    locally it writes `<path>.tmp` and renames it; an object store has no
    cheap rename (a rename is a copy), but an object appears only when its
    upload completes, so the final name is written once.
  - Object stores have no directories: `makedirs` is harmless there and
    `isdir` means "some object's name starts with `path/`".
"""

import builtins
import contextlib
import glob as glob_lib
import io
import os
import re
import shutil

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# Schemes that tensorflow-io registers with TensorFlow when imported (it is tried here).
_TENSORFLOW_IO_SCHEMES = ("s3", "hdfs", "viewfs", "har", "az", "http", "https")
_TENSORFLOW_IO = "tensorflow-io (pip install tensorflow-io), which registers it"


class UnsupportedFileSystemError(ValueError):
    """A path's scheme has no TensorFlow file system in this process."""


def has_scheme(path: str) -> bool:
    """True when `path` starts with `scheme://` (it then goes through `tf.io.gfile`)."""
    return bool(_SCHEME.match(os.fspath(path)))


def _gfile():
    import tensorflow as tf
    return tf.io.gfile


_checked_schemes = set()


def check_supported(path: str) -> None:
    """Raises `UnsupportedFileSystemError` when TensorFlow cannot open `path`'s scheme.

    Local paths always pass (TensorFlow is not imported for them).

    Args:
      path: a path given by the user.
    """
    found = _SCHEME.match(os.fspath(path))
    if not found or found.group(1) in _checked_schemes:
        return
    scheme = found.group(1)
    registered = _gfile().get_registered_schemes()
    if scheme not in registered:
        with contextlib.suppress(ImportError):
            import tensorflow_io  # noqa: F401 (registers s3://, hdfs://, ... on import)
            registered = _gfile().get_registered_schemes()
    if scheme not in registered:
        known = ", ".join(f"{name}://" for name in sorted(registered) if name)
        need = (_TENSORFLOW_IO if scheme in _TENSORFLOW_IO_SCHEMES
                else "a TensorFlow file-system plugin for it")
        raise UnsupportedFileSystemError(
            f"{path}: TensorFlow has no file system for {scheme}:// in this install "
            f"(it has {known}); install {need}")
    _checked_schemes.add(scheme)


def check_paths(*paths) -> str | None:
    """The one-line error for the first given path whose scheme is unsupported, else None.

    Args:
      *paths: paths from the command line; None entries are skipped.
    """
    for path in paths:
        if path is None:
            continue
        try:
            check_supported(path)
        except UnsupportedFileSystemError as error:
            return str(error)
    return None


@contextlib.contextmanager
def _as_os_errors(path):
    """TensorFlow's file errors under the `OSError` classes callers already catch."""
    import tensorflow as tf
    try:
        yield
    except tf.errors.NotFoundError as error:
        raise FileNotFoundError(f"{path}: {error.message}") from None
    except tf.errors.PermissionDeniedError as error:
        raise PermissionError(f"{path}: {error.message}") from None


def _remote(path):
    """True for a scheme path (after checking its scheme is supported)."""
    if not has_scheme(path):
        return False
    check_supported(path)
    return True


class _GFileRaw(io.RawIOBase):
    """A `tf.io.gfile.GFile` in binary mode as a raw stream, so `io` can buffer and decode it."""

    def __init__(self, gfile, mode):
        self._file = gfile
        self._mode = mode

    def readable(self):
        return "r" in self._mode

    def writable(self):
        return "w" in self._mode or "a" in self._mode

    def readinto(self, buffer):
        data = self._file.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)

    def write(self, data):
        self._file.write(bytes(data))
        return len(data)

    def close(self):
        if not self.closed:
            self._file.close()
        super().close()


def open(path: str, mode: str = "r", encoding: str | None = None,  # noqa: A001
         errors: str | None = None, newline: str | None = None):
    """Opens `path` like the built-in `open` (modes r, w, a, each with b).

    Args:
      path: a local path or a scheme path.
      mode: "r", "w" or "a", plus "b" for bytes.
      encoding, errors, newline: as for the built-in `open` (text modes).

    Raises:
      FileNotFoundError: reading a file that does not exist.
    """
    if not _remote(path):
        return builtins.open(path, mode, encoding=encoding, errors=errors, newline=newline)
    kind = mode.replace("b", "").replace("t", "")
    if kind not in ("r", "w", "a"):
        raise ValueError(f"mode {mode!r} is not supported for {path} (expected r, w or a)")
    if kind == "r" and not isfile(path):
        raise FileNotFoundError(f"{path} does not exist")
    if kind == "w":
        _clear_for_write(path)
    with _as_os_errors(path):
        raw = _GFileRaw(_gfile().GFile(path, kind + "b"), kind)
    buffered = io.BufferedReader(raw) if kind == "r" else io.BufferedWriter(raw)
    if "b" in mode:
        return buffered
    return io.TextIOWrapper(buffered, encoding=encoding or "utf-8", errors=errors,
                            newline=newline)


def read_text(path: str, encoding: str = "utf-8") -> str:
    """The whole text of `path`."""
    with open(path, encoding=encoding) as f:
        return f.read()


def read_bytes(path: str) -> bytes:
    """The whole content of `path`."""
    with open(path, "rb") as f:
        return f.read()


@contextlib.contextmanager
def atomic_write(path: str, mode: str = "w", encoding: str | None = None,
                 newline: str | None = None):
    """Opens `path` for writing so that readers see the old content or the new, never half.

    Locally the content goes to `<path>.tmp`, renamed over `path` once
    written (and removed if writing fails). On object storage the final name
    is written once: an object becomes visible only when its upload is
    complete, and a rename there would be a second full copy.

    Args:
      path: the file to (re)write.
      mode: "w" or "wb".
      encoding, newline: as for `open` in text mode.
    """
    if _remote(path):
        with open(path, mode, encoding=encoding, newline=newline) as f:
            yield f
        return
    partial = path + ".tmp"
    try:
        with builtins.open(partial, mode, encoding=encoding, newline=newline) as f:
            yield f
        os.replace(partial, path)
    finally:
        if os.path.exists(partial):
            os.remove(partial)


# TensorFlow's ram:// (the in-memory stand-in for object storage that tests use) differs
# from gs:// three times: its `isdir` and `exists` hold for any string prefix of a stored
# name (`ram://run/ckpt-4` is a directory once `ram://run/ckpt-4.index` exists), so there a
# directory must be an entry itself or hold a name under `path/`; its `listdir` lists the
# rest of every name that starts with `path` (`_results.json` in `ram://run/eval` beside
# `ram://run/eval_results.json`), so only the names that exist under `path/` are kept; and
# opening an existing file for writing appends to it, so it is deleted first.
_RAM_SCHEMES = ("ram",)


def _clear_for_write(path):
    """Deletes file `path` where writing over it would append to it (ram://)."""
    if _SCHEME.match(path).group(1) in _RAM_SCHEMES and isfile(path):
        remove(path)


def _phantom_directory(path):
    """True when only a prefix-matching file system calls `path` a directory."""
    if _SCHEME.match(path).group(1) not in _RAM_SCHEMES:
        return False
    gfile = _gfile()
    pattern = escape(path.rstrip("/"))
    return gfile.isdir(path) and not (gfile.glob(pattern) or gfile.glob(pattern + "/*"))


def exists(path: str) -> bool:
    """True when a file or directory `path` exists."""
    if _remote(path):
        return _gfile().exists(path) and not _phantom_directory(path)
    return os.path.exists(path)


def isdir(path: str) -> bool:
    """True when `path` is a directory (on object storage: a prefix holding objects)."""
    if _remote(path):
        return _gfile().isdir(path) and not _phantom_directory(path)
    return os.path.isdir(path)


def isfile(path: str) -> bool:
    """True when `path` is a file (an object)."""
    if _remote(path):
        gfile = _gfile()
        return gfile.exists(path) and not gfile.isdir(path)
    return os.path.isfile(path)


def getsize(path: str) -> int:
    """The size of file `path` in bytes."""
    if _remote(path):
        with _as_os_errors(path):
            return _gfile().stat(path).length
    return os.path.getsize(path)


def makedirs(path: str, exist_ok: bool = False) -> None:
    """Creates directory `path` and its parents (a no-op where directories are implicit)."""
    if _remote(path):
        if not exist_ok and _gfile().exists(path):
            raise FileExistsError(f"{path} exists")
        _gfile().makedirs(path)
        return
    os.makedirs(path, exist_ok=exist_ok)


def listdir(path: str) -> list:
    """The names of the entries of directory `path` (no trailing slashes)."""
    if _remote(path):
        with _as_os_errors(path):
            names = [name.rstrip("/") for name in _gfile().listdir(path)]
        if _SCHEME.match(path).group(1) in _RAM_SCHEMES:
            names = [name for name in names if exists(join(path, name))]
        return names
    return os.listdir(path)


def glob(pattern: str) -> list:
    """The paths matching `pattern` (unsorted, as `glob.glob`)."""
    if _remote(pattern):
        return _gfile().glob(pattern)
    return glob_lib.glob(pattern)


def escape(path: str) -> str:
    """`path` with glob's special characters escaped (as `glob.escape`)."""
    return glob_lib.escape(path)


def remove(path: str) -> None:
    """Deletes file `path`."""
    if _remote(path):
        with _as_os_errors(path):
            _gfile().remove(path)
        return
    os.remove(path)


def rmtree(path: str, ignore_errors: bool = False) -> None:
    """Deletes directory `path` with everything in it."""
    if _remote(path):
        try:
            with _as_os_errors(path):
                _gfile().rmtree(path)
        except OSError:
            if not ignore_errors:
                raise
        return
    shutil.rmtree(path, ignore_errors=ignore_errors)


def rename(source: str, destination: str) -> None:
    """Moves file `source` to `destination`, replacing it (as `os.replace`).

    On object storage this is a copy then a delete.
    """
    if _remote(source) or _remote(destination):
        if has_scheme(destination):
            _clear_for_write(destination)
        with _as_os_errors(source):
            _gfile().rename(source, destination, overwrite=True)
        return
    os.replace(source, destination)


def copy(source: str, destination: str) -> None:
    """Copies file `source` to `destination`, replacing it (as `shutil.copyfile`)."""
    if _remote(source) or _remote(destination):
        if has_scheme(destination):
            _clear_for_write(destination)
        with _as_os_errors(source):
            _gfile().copy(source, destination, overwrite=True)
        return
    shutil.copyfile(source, destination)


def copy_tree(source: str, destination: str) -> list:
    """Copies every file under directory `source` to the same place under `destination`.

    Either side may be local or a scheme path; existing files are replaced.

    Args:
      source: an existing directory.
      destination: created where directories exist.

    Returns:
      the copied files' paths relative to `source` ("/"-separated), sorted.
    """
    copied = []
    makedirs(destination, exist_ok=True)
    for name in sorted(listdir(source)):
        inner = join(source, name)
        if isdir(inner):
            copied += [f"{name}/{part}" for part in copy_tree(inner, join(destination, name))]
        else:
            copy(inner, join(destination, name))
            copied.append(name)
    return copied


def join(path: str, *names: str) -> str:
    """`path` joined with `names` by `/` (as `os.path.join`; scheme paths keep their scheme)."""
    return os.path.join(path, *names)


def abspath(path: str) -> str:
    """The absolute form of a local path; a scheme path as it is (it is absolute)."""
    return path if has_scheme(path) else os.path.abspath(path)


def free_bytes(path: str) -> int | None:
    """The free space of the file system holding `path`, or None where it has no such notion.

    Object stores have no free space to check: None for every scheme path.
    """
    if has_scheme(path):
        return None
    return shutil.disk_usage(path).free
