"""The conversion matrix's steps: write a source checkpoint, convert it with the CLI.

Shared by `test_conversion_matrix.py` and `python -m research.bench conversion_matrix`.
"""

import contextlib
import io
import os

# The five formats bert_tf converts among (the writable ones of `formats.FORMATS`).
FORMATS = ("bert_tf", "hf", "google", "garden", "kerashub")


def write_source(model, fmt, directory, vocab_file, lower_case=True):
    """Writes `model` in `fmt` into `directory` with `vocab_file`; returns `directory`."""
    from bert_tf.checkpoints import loading

    loading.save(model, directory, format=fmt, vocab_file=vocab_file, lower_case=lower_case)
    return directory


def run_convert(argv):
    """`python -m bert_tf.convert ARGV` in this process: (exit code, stdout, stderr)."""
    from bert_tf import convert

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = convert.main(list(argv))
    return code, out.getvalue(), err.getvalue()


def convert_pair(source_dir, source, target, output_dir, *extra):
    """Converts `source_dir` (format `source`) to `target` in `output_dir`.

    Returns:
      (exit code, stdout, stderr) of the converter.
    """
    return run_convert(["--from", source, "--input", source_dir, "--to", target,
                        "--output", output_dir, *extra])


def pair_dir(root, source, target):
    """Where the conversion of `source` to `target` is written under `root`."""
    return os.path.join(root, f"{source}_to_{target}")
