"""`python -m bert_tf.evaluate --watch` beside a trainer whose model_dir is a gs:// bucket.

Two processes and the local GCS emulator (tests/gcs_emulator.py, TensorFlow's
own GCS file system): the watcher starts first and waits for the run; the
trainer then fine-tunes a tiny STS-B model into the bucket. The watcher
evaluates each checkpoint as it appears and stops after the final one; its
history, TensorBoard events and best copy are in the bucket.
"""

import json
import os
import subprocess
import sys

import pytest
import tensorflow as tf

from bert_tf import continuous_eval
from bert_tf.best_checkpoint import BEST_DIR, RECORD_FILE
from bert_tf.checkpoints import native
from bert_tf.training.summaries import summary_tag
from tests import shared_data
from tests.finetune_helpers import (
    REPO,
    config_overrides,
    config_path,
    save_tiny_encoder,
    tiny_vocab,
)
from tests.helpers import require

# Two processes and real HTTP round trips: the second test command.
# `full`: the watcher runs on local disk beside a training in tests/test_continuous_eval.py
# and on ram:// through the same file layer (test_object_storage_finetuning.py).
pytestmark = [pytest.mark.long, pytest.mark.full]

CHECKPOINT_STEPS = [2, 4, 6, 8]


def _eval_events(run):
    """{step: {tag: value}} of the watcher's event files in `run/eval/`."""
    events = {}
    for path in tf.io.gfile.glob(f"{run}/eval/events.out.tfevents.*.ckpt-*"):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                events.setdefault(event.step, {})[value.tag] = float(
                    tf.make_ndarray(value.tensor))
    return events


def test_a_watcher_evaluates_each_checkpoint_of_a_run_on_gs_and_stops_after_the_last(
        gcs, tmp_path):
    require(shared_data.data_path("glue", "STS-B", "dev.tsv"), "shared data file")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(tiny_vocab()) + "\n")
    init = save_tiny_encoder(tmp_path / "init", vocab)
    run = gcs.path("watched", "run")
    # A request that fails is retried twice, not ten times over three minutes.
    env = dict(os.environ, **gcs.environment, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1",
               GCS_RETRY_CONFIG_MAX_RETRIES="2")
    env.pop("TF_CONFIG", None)
    watcher = subprocess.Popen(
        [sys.executable, "-m", "bert_tf.evaluate", "--model_dir", run, "--watch",
         "--poll_seconds", "1", "--timeout", "300"], cwd=REPO, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        settings = config_overrides("glue_stsb", **{
            "data.max_train_examples": 64, "data.max_eval_examples": 12,
            "data.max_seq_length": 32, "trainer.train_epochs": 0,
            "trainer.train_steps": CHECKPOINT_STEPS[-1],
            "trainer.global_batch_size": 8, "trainer.steps_per_loop": 2,
            "trainer.checkpoint_every": 2, "trainer.max_to_keep": len(CHECKPOINT_STEPS),
            "trainer.eval_every": 0})
        trained = subprocess.run(
            [sys.executable, "-m", "bert_tf.train", "--config", config_path("glue_stsb"),
             "--model_dir", run, "--init_checkpoint", init,
             *[item for setting in settings for item in ("--set", setting)]],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
        assert trained.returncode == 0, trained.stderr[-3000:]
        out, err = watcher.communicate(timeout=600)
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.communicate()
    assert watcher.returncode == 0, err[-3000:]
    assert f"evaluated up to the run's final checkpoint (step {CHECKPOINT_STEPS[-1]})" in out
    # Every checkpoint once, in step order (none was deleted: max_to_keep keeps them all).
    with tf.io.gfile.GFile(f"{run}/{continuous_eval.HISTORY_FILE}") as f:
        history = [json.loads(line) for line in f]
    assert [entry["step"] for entry in history] == CHECKPOINT_STEPS
    assert [line.split(" ")[0] for line in out.splitlines() if line.startswith("ckpt-")] == [
        f"ckpt-{step}" for step in CHECKPOINT_STEPS]
    # The trainer's final evaluation and the watcher's agree on the final checkpoint.
    with tf.io.gfile.GFile(f"{run}/eval_results.json") as f:
        final = json.load(f)
    assert history[-1]["metrics"] == pytest.approx(final["metrics"], abs=1e-4)

    events = _eval_events(run)
    for entry in history:
        assert events[entry["step"]] == pytest.approx(
            {summary_tag(name): value for name, value in entry["metrics"].items()}, rel=1e-6)

    with tf.io.gfile.GFile(f"{run}/{BEST_DIR}/{RECORD_FILE}") as f:
        best = json.load(f)
    best_entry = max(history, key=lambda entry: entry["metrics"]["pearson"])
    assert (best["checkpoint"], best["value"]) == (best_entry["checkpoint"],
                                                  best_entry["metrics"]["pearson"])
    names = gcs.object_names()
    for name in (f"{native.WEIGHTS_PREFIX}.index", native.METADATA_NAME, native.VOCAB_NAME,
                 "params.yaml"):
        assert f"watched/run/{BEST_DIR}/{name}" in names, names
    assert f"best pearson: {best['value']:.4f} at {best['checkpoint']}, in {run}/{BEST_DIR}" in out
