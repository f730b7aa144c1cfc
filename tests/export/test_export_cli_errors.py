"""`python -m bert_tf.export` on a directory it cannot export: one line saying why, exit 2.

A --model_dir that holds no exportable model is a usage error, like a
mistyped option (tests/test_path_args.py checks the same for every command).
"""

import os

from bert_tf.checkpoints import native
from bert_tf.export.__main__ import main as export_main
from tests.export.export_helpers import TASKS, build_model


def _export_error(model_dir, export_dir, capsys):
    """(exit code, stderr lines) of the command, which must not write any version."""
    code = export_main(["--model_dir", str(model_dir), "--export_dir", str(export_dir)])
    captured = capsys.readouterr()
    assert captured.out == ""
    assert not os.path.exists(export_dir)
    return code, captured.err.splitlines()


def test_a_missing_model_dir_is_named(tmp_path, capsys):
    missing = tmp_path / "runs" / "mrpc"
    code, lines = _export_error(missing, tmp_path / "exports", capsys)
    assert code == 2
    assert lines == [f"error: --model_dir {missing} does not exist; expected a bert_tf model "
                     "directory (a training run's model_dir or convert's output)"]


def test_a_file_is_not_a_model_dir(tmp_path, capsys):
    path = tmp_path / "model.keras"
    path.write_text("not a directory")
    code, lines = _export_error(path, tmp_path / "exports", capsys)
    assert code == 2
    assert lines == [f"error: model directory {path} is not a directory"]


def test_a_directory_without_metadata_is_not_a_bert_tf_model(tmp_path, capsys):
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "config.json").write_text("{}")
    code, lines = _export_error(tmp_path / "hf", tmp_path / "exports", capsys)
    assert code == 2 and len(lines) == 1
    assert lines[0].startswith(f"error: {tmp_path / 'hf'} is not a bert_tf model directory "
                               f"(no {native.METADATA_NAME})")
    assert "python -m bert_tf.convert" in lines[0]


def test_a_run_without_a_checkpoint_says_so(tmp_path, capsys, tokenizer, vocab_file):
    """What a training run leaves before its first checkpoint: metadata and vocab only."""
    record = TASKS["classifier"]
    run = tmp_path / "run"
    native.write_metadata(build_model("classifier", record), str(run),
                          tokenizer.tokenizer_contract(), vocab_file, record=record)
    assert (run / native.VOCAB_NAME).is_file()
    code, lines = _export_error(run, tmp_path / "exports", capsys)
    assert code == 2 and len(lines) == 1
    assert lines[0].startswith(f"error: {run} has no checkpoint (no ckpt-N or weights.* files)")
