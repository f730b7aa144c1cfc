"""Data files that fail under a running job: one line naming the file, nothing lost.

A training file that disappears mid-run stops the run with one line and costs
at most the steps since its last checkpoint; the same command resumes once the
file is back. An evaluation that cannot read its files fails after the step's
checkpoint is written, and the resumed run evaluates that step first.
"""

import os
import shutil
import signal

import pytest
import tensorflow as tf
import yaml
from conftest import run_train, start_until_step, tiny_experiment

pytestmark = pytest.mark.slow


def _error_lines(stderr):
    assert "Traceback" not in stderr, stderr[-3000:]
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def _write(tmp_path, experiment):
    path = tmp_path / "experiment.yaml"
    path.write_text(yaml.safe_dump(experiment))
    return str(path)


def test_a_training_file_lost_mid_run_stops_with_one_line_and_resumes(
        tmp_path, bert_corpus, shared_file):
    # One short file of two documents: the endless input re-reads it every few steps.
    source = os.path.join(bert_corpus, sorted(os.listdir(bert_corpus))[0])
    lines = open(source, encoding="utf-8").read().splitlines()[:60]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(lines[:30]) + "\n\n" + "\n".join(lines[30:]) + "\n")
    backup = tmp_path / "corpus.bak"
    shutil.copyfile(corpus, backup)
    experiment = tiny_experiment(bert_corpus, shared_file("vocab", "bert-base-uncased-vocab.txt"),
                                 trainer={"train_steps": 100000, "steps_per_loop": 1,
                                          "checkpoint_every": 3, "eval_every": 0})
    experiment["data"].update(train_files=[str(corpus)], eval_holdout_every=0)
    config = _write(tmp_path, experiment)
    model_dir = tmp_path / "run"

    process, output = start_until_step(config, model_dir, 4)
    corpus.unlink()
    output += process.stdout.readlines()
    assert process.wait(timeout=120) == 1, "".join(output[-30:])
    (error,) = _error_lines("".join(output))
    assert f"{corpus}: No such file or directory" in error, error
    latest = tf.train.latest_checkpoint(str(model_dir))
    assert latest is not None and f"({os.path.basename(latest)}) is kept" in error, error

    # Repaired: the same command resumes. A checkpoint saved while the input
    # pipeline already held the error replays it; it is set aside for an older one.
    shutil.copyfile(backup, corpus)
    step = int(latest.rsplit("-", 1)[1])
    process, output = start_until_step(config, model_dir, step + 1)
    process.send_signal(signal.SIGTERM)
    output += process.stdout.readlines()
    log = "".join(output)
    assert process.wait(timeout=120) == 0, log[-3000:]
    assert f"resumed from {latest} (step {step})" in log
    assert not _error_lines(log)


def test_a_failing_evaluation_keeps_the_steps_before_it(write_config, tmp_path, bert_corpus):
    eval_file = tmp_path / "eval" / "held_out.txt"
    config = write_config(
        data={"eval_files": [str(eval_file)]},
        trainer={"train_steps": 4, "steps_per_loop": 1, "checkpoint_every": 100,
                 "eval_every": 2, "eval_steps": 1})
    model_dir = tmp_path / "run"
    result = run_train(config, model_dir)
    assert result.returncode == 1
    (error,) = _error_lines(result.stderr)
    assert "cannot read the evaluation data" in error and str(eval_file) in error, error
    # The step's checkpoint was written before the evaluation ran.
    assert tf.train.latest_checkpoint(str(model_dir)).endswith("ckpt-2")

    eval_file.parent.mkdir()
    shutil.copyfile(os.path.join(bert_corpus, sorted(os.listdir(bert_corpus))[0]), eval_file)
    result = run_train(config, model_dir)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "resumed from" in result.stderr and "(step 2)" in result.stderr
    # The evaluation that failed runs first, then training goes on.
    assert result.stderr.index("eval at step 2") < result.stderr.index("step 3/4")
    assert "eval at step 4" in result.stderr
