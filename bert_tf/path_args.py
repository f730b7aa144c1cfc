"""Checks that a path a command reads (--model_dir, --init_checkpoint, ...) is there.

A path that does not exist, or an empty directory, is a mistake on the
command line like an unknown option: the command prints one line naming the
option, the path and what it expected there, and exits with argparse's usage
code, before TensorFlow is imported.
"""

import os

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
    if os.path.isdir(path):
        if not os.listdir(path):
            return f"{option} {path} is an empty directory; expected {expected}"
        return None
    if os.path.exists(path) or os.path.exists(path + ".index"):
        return None
    return f"{option} {path} does not exist; expected {expected}"
