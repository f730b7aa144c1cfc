"""Checks that a path a command reads (--model_dir, --init_checkpoint, ...) is there.

A path that does not exist, or an empty directory, is a mistake on the
command line like an unknown option: the command prints one line naming the
option, the path and what it expected there, and exits with argparse's usage
code, before TensorFlow is imported (for a local path; a `gs://...` path is
checked through `tf.io.gfile`). So is a path whose scheme TensorFlow has no
file system for (`s3://...` without tensorflow-io).
"""


from bert_tf import storage

# argparse's exit code for a command-line mistake.
USAGE_ERROR = 2
# What a checkpoint option expects: any format `bert_tf.checkpoints.loading` reads.
CHECKPOINT = ("a checkpoint (a bert_tf run or model directory, a .keras file, Google TF1, "
              "Hugging Face or Model Garden)")


def input_path_problem(path: str, option: str, expected: str) -> str | None:
    """The one-line error when `path` is missing or an empty directory, else None.

    A TensorFlow checkpoint prefix (`dir/ckpt-5`, whose files are
    `ckpt-5.index` and `ckpt-5.data-*`) counts as present.

    Args:
      path: the value given on the command line.
      option: the option that took it, e.g. "--model_dir".
      expected: what should be there, e.g. "a training run's model_dir".
    """
    problem = scheme_problem((option, path))
    if problem:
        return problem
    if storage.isdir(path):
        if not storage.listdir(path):
            return f"{option} {path} is an empty directory; expected {expected}"
        return None
    if storage.exists(path) or storage.exists(path + ".index"):
        return None
    return f"{option} {path} does not exist; expected {expected}"


def scheme_problem(*options: tuple[str, str | None]) -> str | None:
    """The one-line error for the first path whose scheme TensorFlow cannot open, else None.

    Args:
      *options: (option name, the value given, None when not given) pairs,
        e.g. `("--model_dir", args.model_dir), ("--export_dir", args.export_dir)`.
    """
    for option, path in options:
        problem = storage.check_paths(path)
        if problem:
            return f"{option} {problem}"
    return None
