"""Expanding input file patterns, with errors that name the pattern.

Shared by the corpus reader, the TFRecord reader and the vocabulary builder.
Local patterns use `glob` (so tools that do not need TensorFlow stay light);
patterns with a scheme (`gs://...`) go through `tf.io.gfile`.
"""


from bert_tf import storage


class NoMatchingFilesError(FileNotFoundError, ValueError):
    """A file pattern matches no readable file (both a FileNotFoundError and a ValueError)."""


def _glob(pattern):
    if "://" in pattern:
        import tensorflow as tf
        return [(path, tf.io.gfile.isdir(path)) for path in tf.io.gfile.glob(pattern)]
    return [(path, storage.isdir(path)) for path in storage.glob(pattern)]


def expand_file_patterns(file_patterns, kind="input"):
    """The files matching `file_patterns`, in a stable order.

    Args:
      file_patterns: a glob pattern or a list of them.
      kind: what the files are, for error messages ("corpus", "TFRecord").

    Returns:
      Each pattern's matches sorted, patterns in the given order, a file
      listed only at its first position; directories are skipped.

    Raises:
      ValueError: no pattern given.
      NoMatchingFilesError: a pattern matches no file, or only directories.
    """
    patterns = [file_patterns] if isinstance(file_patterns, str) else list(file_patterns)
    if not patterns:
        raise ValueError(f"no {kind} file pattern given")
    files, seen = [], set()
    for pattern in patterns:
        matches = sorted(_glob(pattern))
        if not matches:
            raise NoMatchingFilesError(f"{kind} file pattern {pattern!r} matches no file")
        regular = [path for path, is_dir in matches if not is_dir]
        if not regular:
            raise NoMatchingFilesError(
                f"{kind} file pattern {pattern!r} matches only directories "
                f"({[path for path, _ in matches][:3]}); expected files")
        for path in regular:
            if path not in seen:
                seen.add(path)
                files.append(path)
    return files
