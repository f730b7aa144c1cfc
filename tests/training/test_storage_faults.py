"""Data files that fail under a running job: one line naming the file, nothing lost.

A training file that disappears mid-run stops the run with one line and costs
at most the steps since its last checkpoint; the same command resumes once the
file is back. An evaluation that cannot read its files fails after the step's
checkpoint is written, and the resumed run evaluates that step first.
"""

import logging
import os
import shutil
import signal

import pytest
import tensorflow as tf
import yaml
from conftest import start_until_step, tiny_experiment

pytestmark = pytest.mark.slow


def _error_lines(stderr):
    assert "Traceback" not in stderr, stderr[-3000:]
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def _write(tmp_path, experiment):
    path = tmp_path / "experiment.yaml"
    path.write_text(yaml.safe_dump(experiment))
    return str(path)


# A real trainer process stopped mid-run: the second test command.
@pytest.mark.long
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


def _train_in_process(config, model_dir):
    from bert_tf import tasks, train

    task_class, experiment = tasks.load_experiment(config, [])
    return train.run(task_class, experiment, str(model_dir))


@pytest.mark.long
def test_a_failing_evaluation_keeps_the_steps_before_it(write_config, tmp_path, bert_corpus,
                                                        capsys, caplog):
    eval_file = tmp_path / "eval" / "held_out.txt"
    config = write_config(
        data={"eval_files": [str(eval_file)]},
        trainer={"train_steps": 4, "steps_per_loop": 1, "checkpoint_every": 100,
                 "eval_every": 2, "eval_steps": 1})
    model_dir = tmp_path / "run"
    assert _train_in_process(config, model_dir) == 1
    (error,) = _error_lines(capsys.readouterr().err)
    assert "cannot read the evaluation data" in error and str(eval_file) in error, error
    # The step's checkpoint was written before the evaluation ran.
    assert tf.train.latest_checkpoint(str(model_dir)).endswith("ckpt-2")
    assert "(ckpt-2) is kept" in error

    eval_file.parent.mkdir()
    shutil.copyfile(os.path.join(bert_corpus, sorted(os.listdir(bert_corpus))[0]), eval_file)
    with caplog.at_level(logging.INFO):
        assert _train_in_process(config, model_dir) == 0
    log = [record.getMessage() for record in caplog.records]
    assert f"resumed from {model_dir / 'ckpt-2'} (step 2)" in log
    # The evaluation that failed runs first, then training goes on.
    evaluated = [i for i, line in enumerate(log) if line.startswith("eval at step")]
    trained = [i for i, line in enumerate(log) if line.startswith("step ")]
    assert [log[i].split(":")[0] for i in evaluated] == ["eval at step 2", "eval at step 4"]
    assert evaluated[0] < trained[0], log
