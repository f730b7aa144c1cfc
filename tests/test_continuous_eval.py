"""`evaluate --checkpoint` and `evaluate --watch`: each checkpoint of a run evaluated beside it.

One short STS-B run of a tiny encoder (vocab of 76 tokens, hidden 16) leaves
checkpoints at steps 2, 4 and 6; a watcher evaluates them in this process
while `trainer.max_to_keep` is made to delete ckpt-4 as it is read. The
trainer-beside-the-watcher journey, in two processes, is the long test.
"""

import json
import logging
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import continuous_eval, evaluate
from bert_tf.best_checkpoint import BEST_DIR, RECORD_FILE, BestCheckpoint
from bert_tf.checkpoints import native, readable, weight_map
from bert_tf.training.summaries import summary_tag
from tests.finetune_helpers import REPO, config_overrides, config_path, finetune, tiny_vocab
from tests.helpers import one_line_refusal, require

STEPS = (2, 4, 6)
# Where the package's own log records come from.
PACKAGE_DIR = os.path.dirname(os.path.abspath(continuous_eval.__file__)) + os.sep
# The checkpoint "deleted by max_to_keep" while the watcher reads it.
DELETED = "ckpt-4"


def _tiny_vocab(path):
    tokens = tiny_vocab()
    path.write_text("\n".join(tokens) + "\n")
    return len(tokens)


@pytest.fixture(scope="module")
def stsb_run(tmp_path_factory):
    """A 6-step STS-B run with a checkpoint every 2 steps, all kept."""
    from bert_tf.checkpoints import loading
    from bert_tf.models.bert_encoder import BertEncoder
    from tests import shared_data

    require(shared_data.data_path("glue", "STS-B", "dev.tsv"), "shared data file")
    root = tmp_path_factory.mktemp("stsb")
    vocab_size = _tiny_vocab(root / "vocab.txt")
    encoder = BertEncoder(vocab_size=vocab_size, hidden_size=16, num_layers=2, num_heads=2,
                          intermediate_size=32, max_position_embeddings=64)
    loading.save(encoder, str(root / "init"), vocab_file=str(root / "vocab.txt"),
                 lower_case=True)
    code = finetune("glue_stsb", root / "run", str(root / "init"), **{
        "data.max_train_examples": 16, "data.max_eval_examples": 12,
        "data.max_seq_length": 32, "trainer.train_steps": STEPS[-1],
        "trainer.global_batch_size": 8, "trainer.steps_per_loop": 2,
        "trainer.checkpoint_every": 2, "trainer.max_to_keep": 5, "trainer.eval_every": 0})
    assert code == 0
    return str(root / "run")


class _Records(logging.Handler):
    """bert_tf's warnings; TensorFlow's own (a retracing notice after other tests'
    evaluations in the same process) are not the watcher's."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        if os.path.abspath(record.pathname).startswith(PACKAGE_DIR):
            self.messages.append(record.getMessage())


def _no_sleep(seconds):
    raise AssertionError(f"the watcher waited ({seconds} s) although every checkpoint is there")


@pytest.fixture(scope="module")
def watched(stsb_run, tmp_path_factory):
    """A copy of the run watched to its end; ckpt-4 vanishes while it is being read.

    Returns (run directory, task, watcher, result, printed lines, warnings).
    """
    run = str(tmp_path_factory.mktemp("watched") / "run")
    shutil.copytree(stsb_run, run)
    task = evaluate.load_task(run)
    real_read = readable.read_every_tensor

    def deleted_while_read(prefix, *args):
        if os.path.basename(prefix) == DELETED:
            for path in tf.io.gfile.glob(prefix + ".*"):
                tf.io.gfile.remove(path)
        return real_read(prefix, *args)

    printed, records = [], _Records()
    logging.getLogger().addHandler(records)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(readable, "read_every_tensor", deleted_while_read)
            watcher = continuous_eval.Watcher(task, run, batch_size=5, report=printed.append,
                                              sleep=_no_sleep)
            result = watcher.run()
    finally:
        logging.getLogger().removeHandler(records)
    return run, task, watcher, result, printed, records.messages


def _history(run):
    with open(os.path.join(run, continuous_eval.HISTORY_FILE)) as f:
        return [json.loads(line) for line in f]


@pytest.mark.slow
def test_each_checkpoint_is_evaluated_once_in_step_order(watched):
    run, _, _, result, printed, _ = watched
    history = _history(run)
    assert [entry["checkpoint"] for entry in history] == ["ckpt-2", "ckpt-6"]
    assert result.evaluated == history and result.skipped == [DELETED] and result.complete
    assert set(history[0]["metrics"]) == {"pearson", "spearman"}
    assert [line.split(" ")[0] for line in printed] == ["ckpt-2", "ckpt-6"]


@pytest.mark.slow
def test_watched_metrics_equal_evaluating_the_checkpoint_alone(watched, stsb_run):
    run, _, _, _, _, _ = watched
    alone = evaluate.evaluate_run(stsb_run, batch_size=5, checkpoint="ckpt-2")
    assert _history(run)[0]["metrics"] == alone
    # The newest checkpoint scores otherwise: ckpt-2 was evaluated, not the newest.
    assert alone != _history(run)[1]["metrics"]


@pytest.mark.slow
def test_a_checkpoint_deleted_while_read_is_skipped_with_one_line(watched):
    *_, warnings = watched
    assert warnings == [f"{DELETED} was deleted before it could be read (the trainer keeps "
                        "only its newest trainer.max_to_keep checkpoints); skipped"]


def _watcher_events(run):
    """{step: {tag: value}} of the event files the watcher wrote in RUN/eval."""
    events = {}
    for path in tf.io.gfile.glob(os.path.join(run, "eval", "events.out.tfevents.*.ckpt-*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                number = float(tf.make_ndarray(value.tensor))
                events.setdefault(event.step, {})[value.tag] = number
    return events


@pytest.mark.slow
def test_tensorboard_gets_each_evaluation_at_its_step(watched):
    run = watched[0]
    expected = {entry["step"]: {summary_tag(name): value
                                for name, value in entry["metrics"].items()}
                for entry in _history(run)}
    events = _watcher_events(run)
    assert sorted(events) == [2, 6]
    for step, values in expected.items():
        assert events[step] == pytest.approx(values, rel=1e-6)
    assert set(events[2]) == {"metrics/pearson", "metrics/spearman"}


def _weights(prefix, model):
    return native.read_arrays(prefix, weight_map.task_slots(model))


@pytest.mark.slow
def test_the_best_copy_holds_the_best_checkpoint(watched):
    run, _, watcher, result, _, _ = watched
    history = _history(run)
    best = max(history, key=lambda entry: entry["metrics"]["pearson"])
    with open(os.path.join(run, BEST_DIR, RECORD_FILE)) as f:
        record = json.load(f)
    assert record == result.best
    assert (record["checkpoint"], record["value"]) == (best["checkpoint"],
                                                       best["metrics"]["pearson"])
    copied = _weights(os.path.join(run, BEST_DIR, native.WEIGHTS_PREFIX), watcher.model)
    original = _weights(os.path.join(run, best["checkpoint"]), watcher.model)
    assert copied.keys() == original.keys() and len(copied) > 10
    for name in copied:
        np.testing.assert_array_equal(copied[name], original[name])
    # A model directory evaluate reads: the best checkpoint's metrics again.
    assert evaluate.evaluate_run(os.path.join(run, BEST_DIR), batch_size=5) == best["metrics"]


@pytest.mark.slow
def test_a_restarted_watcher_evaluates_nothing_again_and_stops(watched):
    run, task, _, _, _, _ = watched
    before = _history(run)
    result = continuous_eval.Watcher(task, run, report=print, sleep=_no_sleep).run()
    assert result.complete and result.evaluated == [] and _history(run) == before


@pytest.mark.slow
def test_without_the_final_checkpoint_it_stops_after_the_timeout(watched, tmp_path):
    """params.yaml raised to 100 steps: no checkpoint is final; the clock runs out."""
    run = str(tmp_path / "run")
    shutil.copytree(watched[0], run)
    params = os.path.join(run, "params.yaml")
    with open(params) as f:
        text = f.read()
    with open(params, "w") as f:
        f.write(text.replace("train_steps: 6\n", "train_steps: 100\n", 1))
    assert continuous_eval.final_step(run) == 100
    now, sleeps = [0.0], []

    def sleep(seconds):
        sleeps.append(seconds)
        now[0] += seconds

    result = continuous_eval.Watcher(watched[1], run, poll_seconds=5, timeout_seconds=12,
                                     sleep=sleep, clock=lambda: now[0]).run()
    assert not result.complete and result.evaluated == []
    assert sleeps == [5, 5, 5]


@pytest.mark.slow
def test_a_removed_best_copy_is_rebuilt_from_the_history_by_the_chosen_mode(watched, tmp_path):
    """Restarted with --best_mode min after removing RUN/best: no evaluation, the worst
    checkpoint of the history restored and copied, and exported as version 1."""
    run = str(tmp_path / "run")
    shutil.copytree(watched[0], run)
    shutil.rmtree(os.path.join(run, BEST_DIR))
    exports = str(tmp_path / "exports" / "stsb")
    watcher = continuous_eval.Watcher(watched[1], run, best_mode="min", export_dir=exports,
                                      sleep=_no_sleep)
    result = watcher.run()
    worst = min(_history(run), key=lambda entry: entry["metrics"]["pearson"])
    assert result.evaluated == []
    assert (result.best["checkpoint"], result.best["mode"]) == (worst["checkpoint"], "min")
    assert result.best["export"] == os.path.join(exports, "1")
    assert os.listdir(exports) == ["1"]
    assert os.path.isfile(os.path.join(exports, "1", "saved_model.pb"))
    copied = _weights(os.path.join(run, BEST_DIR, native.WEIGHTS_PREFIX), watcher.model)
    original = _weights(os.path.join(run, worst["checkpoint"]), watcher.model)
    for name in copied:
        np.testing.assert_array_equal(copied[name], original[name])
    # Started again: the best is already exported; nothing new is written.
    continuous_eval.Watcher(watched[1], run, best_mode="min", export_dir=exports,
                            sleep=_no_sleep).run()
    assert os.listdir(exports) == ["1"]


@pytest.mark.slow
def test_an_unknown_best_metric_lists_the_metrics(watched):
    with pytest.raises(ValueError, match=r"^--best_metric 'f1' is not a metric of this run's "
                                         r"evaluation; expected one of \['pearson', "
                                         r"'spearman'\]$"):
        continuous_eval.Watcher(watched[1], watched[0], best_metric="f1")


def test_a_best_copy_chosen_by_another_metric_is_refused(tmp_path):
    (tmp_path / BEST_DIR).mkdir()
    (tmp_path / BEST_DIR / RECORD_FILE).write_text(json.dumps(
        {"checkpoint": "ckpt-2", "metric": "pearson", "mode": "max", "value": 0.5}))
    assert BestCheckpoint(str(tmp_path), "pearson", True).value == 0.5
    with pytest.raises(ValueError, match=r"holds the best checkpoint by 'pearson' \(max\), "
                                         r"not by 'spearman' \(max\): pass --best_metric "
                                         r"pearson --best_mode max, or remove "):
        BestCheckpoint(str(tmp_path), "spearman", True)
    with pytest.raises(ValueError, match=r"by 'pearson' \(max\), not by 'pearson' \(min\)"):
        BestCheckpoint(str(tmp_path), "pearson", False)


def test_the_bookkeeping_goes_through_gfile():
    """History, summaries, the checkpoint list and params.yaml on TensorFlow's in-memory
    filesystem (`ram://`), as they would be on gs://."""
    run = "ram://watched_run"
    tf.io.gfile.makedirs(run)
    with tf.io.gfile.GFile(f"{run}/params.yaml", "w") as f:
        f.write("task: glue\ntrainer:\n  train_steps: 6\n")
    with tf.io.gfile.GFile(f"{run}/checkpoint", "w") as f:
        f.write('model_checkpoint_path: "ckpt-6"\nall_model_checkpoint_paths: "ckpt-4"\n'
                'all_model_checkpoint_paths: "ckpt-6"\n')
    assert continuous_eval.final_step(run) == 6
    assert continuous_eval.run_checkpoints(run) == [(4, f"{run}/ckpt-4"), (6, f"{run}/ckpt-6")]
    history = continuous_eval.History(run)
    for step in (4, 6):
        history.append({"checkpoint": f"ckpt-{step}", "step": step, "metrics": {"f1": step / 10}})
    assert continuous_eval.History(run).entries == history.entries
    assert continuous_eval.History(run).steps == {4, 6}
    continuous_eval.write_summaries(run, 6, "ckpt-6", {"f1": 0.5})
    (path,) = tf.io.gfile.glob(f"{run}/eval/*.ckpt-6")
    values = [(event.step, value.tag, float(tf.make_ndarray(value.tensor)))
              for event in tf.compat.v1.train.summary_iterator(path)
              for value in event.summary.value]
    assert values == [(6, "metrics/f1", 0.5)]


def test_a_damaged_history_line_is_named(tmp_path):
    (tmp_path / continuous_eval.HISTORY_FILE).write_text('{"step": 2, "metrics": {}}\n{"step"\n')
    with pytest.raises(ValueError, match=r"eval_history.jsonl line 2 is not an evaluation "
                                         r"entry \(a JSON object with 'step' and 'metrics'\)"):
        continuous_eval.History(str(tmp_path))


def test_lower_is_better_only_for_losses_errors_and_perplexities():
    from bert_tf.tasks.glue import GlueTask

    task = GlueTask(GlueTask.config_class())
    assert [name for name in ("loss", "eng.testa/f1", "mlm_loss", "perplexity", "exact_match",
                              "error", "word_error", "pearson", "accuracy")
            if not task.higher_is_better(name)] == ["loss", "mlm_loss", "perplexity", "error",
                                                    "word_error"]


@pytest.mark.slow
def test_a_missing_checkpoint_is_named_with_the_available_ones(stsb_run, capsys):
    line = one_line_refusal(evaluate.main, ["--model_dir", stsb_run, "--checkpoint", "ckpt-9"],
                            capsys)
    assert line == (f"error: checkpoint ckpt-9 is not in {stsb_run}; its checkpoints: "
                    "ckpt-2, ckpt-4, ckpt-6")


@pytest.mark.parametrize("options, message", [
    (["--poll_seconds", "5"], "--poll_seconds is an option of --watch"),
    (["--export_best", "x"], "--export_best is an option of --watch"),
    (["--watch", "--checkpoint", "ckpt-2"], "--checkpoint does not go with --watch"),
    (["--watch", "--split", "dev"], "--split does not go with --watch"),
    (["--watch", "--timeout", "0"], "--timeout must be a positive number of seconds, got 0"),
])
def test_watch_options_that_do_not_fit_are_refused(tmp_path, capsys, options, message):
    line = one_line_refusal(evaluate.main, ["--model_dir", str(tmp_path), *options], capsys)
    assert line.startswith(f"error: {message}")


def test_a_run_that_never_starts_ends_after_the_timeout(tmp_path, capsys):
    missing = tmp_path / "not_yet"
    line = one_line_refusal(evaluate.main, ["--model_dir", str(missing), "--watch",
                                            "--poll_seconds", "0.1", "--timeout", "0.3"], capsys)
    assert line == (f"error: no training run started in {missing} within --timeout 0.3 s "
                    "(no params.yaml)")


@pytest.mark.long
def test_watching_a_run_while_it_trains(tmp_path):
    """The trainer and the watcher as two processes, the watcher started first."""
    from tests import shared_data

    require(shared_data.data_path("glue", "STS-B", "dev.tsv"), "shared data file")
    vocab_size = _tiny_vocab(tmp_path / "vocab.txt")
    from bert_tf.checkpoints import loading
    from bert_tf.models.bert_encoder import BertEncoder

    encoder = BertEncoder(vocab_size=vocab_size, hidden_size=16, num_layers=2, num_heads=2,
                          intermediate_size=32, max_position_embeddings=64)
    loading.save(encoder, str(tmp_path / "init"), vocab_file=str(tmp_path / "vocab.txt"),
                 lower_case=True)
    run = tmp_path / "run"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
    watcher = subprocess.Popen(
        [sys.executable, "-m", "bert_tf.evaluate", "--model_dir", str(run), "--watch",
         "--poll_seconds", "1", "--timeout", "240"], cwd=REPO, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    settings = config_overrides("glue_stsb", **{
        "data.max_train_examples": 32, "data.max_eval_examples": 12,
        "data.max_seq_length": 32, "trainer.train_steps": 12, "trainer.global_batch_size": 8,
        "trainer.steps_per_loop": 2, "trainer.checkpoint_every": 2, "trainer.max_to_keep": 2,
        "trainer.eval_every": 0})
    trained = subprocess.run(
        [sys.executable, "-m", "bert_tf.train", "--config", config_path("glue_stsb"),
         "--model_dir", str(run), "--init_checkpoint", str(tmp_path / "init"),
         *[item for setting in settings for item in ("--set", setting)]],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert trained.returncode == 0, trained.stderr[-2000:]
    out, err = watcher.communicate(timeout=600)
    assert watcher.returncode == 0, err[-2000:]
    evaluated = [entry["step"] for entry in _history(str(run))]
    skipped = [step for step in range(2, 13, 2)
               if f"ckpt-{step} was deleted before it could be read" in err]
    # Each checkpoint once, in step order: evaluated, or gone before the watcher got to it.
    assert evaluated == sorted(evaluated) and evaluated[-1] == 12
    assert set(evaluated) | set(skipped) <= set(range(2, 13, 2))
    assert not set(evaluated) & set(skipped)
    assert "evaluated up to the run's final checkpoint (step 12)" in out
    assert os.path.isfile(run / BEST_DIR / RECORD_FILE)
