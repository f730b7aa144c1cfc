"""A command given a missing or empty model directory or checkpoint: one line, exit code 2.

The same code as an unknown option (argparse's usage error), decided before
TensorFlow is imported, and the same for every command that reads one.
"""

import importlib

import pytest

from bert_tf import path_args

# (module, arguments before the path, the option that takes it, arguments after it)
COMMANDS = [
    ("bert_tf.evaluate", [], "--model_dir", []),
    ("bert_tf.predict", ["--output_dir", "{tmp}/predictions"], "--model_dir", []),
    ("bert_tf.export.__main__", ["--export_dir", "{tmp}/exports"], "--model_dir", []),
    ("bert_tf.train", ["--config", "finetune/glue_mrpc", "--model_dir", "{tmp}/run"],
     "--init_checkpoint", []),
    ("bert_tf.sweep", ["--config", "finetune/glue_mrpc", "--model_dir", "{tmp}/sweep"],
     "--init_checkpoint", []),
    ("bert_tf.extract_features", ["--input_file", "{tmp}/lines.txt", "--output_file",
                                  "{tmp}/features.jsonl"], "--init_checkpoint", []),
    ("bert_tf.convert", ["--output", "{tmp}/converted"], "--input", []),
    ("bert_tf.summary", [], "--checkpoint", []),
]


def _run(module, argv, capsys):
    """(exit code, stdout, stderr lines) of `module.main(argv)`."""
    main = importlib.import_module(module).main
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's own exits
        code = e.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err.splitlines()


@pytest.mark.parametrize("module, before, option, after", COMMANDS,
                         ids=[command[0].split(".")[1] for command in COMMANDS])
@pytest.mark.parametrize("state", ["missing", "empty"])
def test_a_missing_or_empty_directory_is_a_usage_error(module, before, option, after, state,
                                                       tmp_path, capsys):
    (tmp_path / "lines.txt").write_text("a line of text\n")
    directory = tmp_path / "runs" / "mrpc"
    if state == "empty":
        directory.mkdir(parents=True)
    argv = [part.format(tmp=tmp_path) for part in before] + [option, str(directory), *after]
    code, out, lines = _run(module, argv, capsys)
    assert code == path_args.USAGE_ERROR, lines
    assert out == ""
    what = "does not exist" if state == "missing" else "is an empty directory"
    assert len(lines) == 1 and lines[0].startswith(f"error: {option} {directory} {what}; "
                                                   "expected "), lines
    assert not (tmp_path / "exports").exists() and not (tmp_path / "run").exists()


def test_a_checkpoint_prefix_counts_as_present(tmp_path):
    (tmp_path / "ckpt-5.index").write_text("")
    assert path_args.input_path_problem(str(tmp_path / "ckpt-5"), "--init_checkpoint",
                                        "a checkpoint") is None


def test_a_resumed_run_does_not_need_its_init_checkpoint(tmp_path):
    from bert_tf import train

    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "ckpt-4"\n')
    assert train.init_checkpoint_problem(str(tmp_path / "gone"), str(tmp_path)) is None
    assert "does not exist" in train.init_checkpoint_problem(str(tmp_path / "gone"),
                                                             str(tmp_path / "new_run"))
