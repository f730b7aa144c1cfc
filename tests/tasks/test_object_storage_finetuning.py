"""A fine-tuning run and every command after it, on TensorFlow's in-memory `ram://` file system.

One module run, in this process (`ram://` is this process's alone): the
init checkpoint, vocabulary, GLUE files and config are copied to `ram://`,
then `python -m bert_tf.train`'s main fine-tunes a tiny STS-B model into a
`ram://` model_dir. The tests evaluate it (newest and a named checkpoint),
watch it, predict, sweep and convert it to and from every checkpoint
format, all with their outputs on `ram://`; the local disk stays as it was
(`tests/local_disk.py`). `ram://` stands for gs:// and any other
`tf.io.gfile` file system; the gs:// route itself is in
tests/training/test_object_storage.py.
"""

import json
import os
import uuid

import numpy as np
import pytest
import yaml

import bert_tf
from bert_tf import continuous_eval, convert, evaluate, predict, storage, sweep, train
from bert_tf.best_checkpoint import BEST_DIR, RECORD_FILE
from bert_tf.checkpoints import loading, weight_map
from tests import shared_data
from tests.finetune_helpers import config_path, save_tiny_encoder, tiny_vocab
from tests.helpers import require
from tests.local_disk import LocalDiskGuard

# Trainings and conversions in this process: the second test command.
pytestmark = [pytest.mark.slow, pytest.mark.long]

STEPS = (2, 4, 6)
# Lines of each GLUE file copied (after its header): enough to learn and score a little.
GLUE_LINES = {"train": 32, "dev": 16, "test": 8}
# The formats a bert_tf encoder converts to and back from (`keras` is read only).
WRITABLE_FORMATS = ("hf", "google", "garden", "kerashub")


def _copy_glue_head(root):
    """The first lines of STS-B's files under `root/glue/STS-B/`; returns `root/glue`."""
    source = require(shared_data.data_path("glue", "STS-B"), "shared data folder")
    glue = storage.join(root, "glue")
    storage.makedirs(storage.join(glue, "STS-B"), exist_ok=True)
    for split, count in GLUE_LINES.items():
        with open(os.path.join(source, f"{split}.tsv"), encoding="utf-8") as f:
            lines = [line for _, line in zip(range(count + 1), f)]
        with storage.open(storage.join(glue, "STS-B", f"{split}.tsv"), "w",
                          encoding="utf-8") as f:
            f.writelines(lines)
    return glue


@pytest.fixture(scope="module")
def local_disk(tmp_path_factory):
    """The module's empty working and temporary directories (`LocalDiskGuard`)."""
    with pytest.MonkeyPatch.context() as patch:
        yield LocalDiskGuard(tmp_path_factory.mktemp("local_disk"), patch)


@pytest.fixture
def no_local_writes(local_disk):
    yield
    local_disk.check()


@pytest.fixture(scope="module")
def finetuned(local_disk):
    """(root, run, init checkpoint, config, overrides): a 6-step STS-B run, all on ram://."""
    root = f"ram://finetune-{uuid.uuid4().hex[:8]}"
    vocab = storage.join(root, "vocab.txt")
    with storage.open(vocab, "w", encoding="utf-8") as f:
        f.write("\n".join(tiny_vocab()) + "\n")
    # The tanh GELU: what every format, KerasHub's included, can hold.
    init = save_tiny_encoder(storage.join(root, "init"), vocab, hidden_act="gelu_tanh")
    config = storage.join(root, "glue_stsb.yaml")
    storage.copy(config_path("glue_stsb"), config)
    overrides = [f"data.data_dir={_copy_glue_head(root)}", "data.max_seq_length=32",
                 "trainer.global_batch_size=8", "trainer.eval_batch_size=8",
                 "trainer.steps_per_loop=2", "trainer.max_to_keep=5", "runtime.strategy=cpu",
                 "runtime.deterministic=true", "optimizer.learning_rate=1e-3"]
    run = storage.join(root, "run")
    argv = ["--config", config, "--model_dir", run, "--init_checkpoint", init,
            "--set", "trainer.train_epochs=0", "--set", f"trainer.train_steps={STEPS[-1]}",
            "--set", "trainer.checkpoint_every=2"]
    assert train.main(argv + [item for setting in overrides for item in ("--set", setting)]) == 0
    return root, run, init, config, overrides


def _printed_metrics(out):
    return {name: float(value) for name, value in (line.split() for line in out.splitlines()
                                                   if line.count(" ") == 1)}


def test_evaluate_predict_and_watch_write_their_outputs_on_object_storage(
        finetuned, no_local_writes, capsys):
    root, run, *_ = finetuned
    capsys.readouterr()
    assert evaluate.main(["--model_dir", run]) == 0
    newest = _printed_metrics(capsys.readouterr().out)
    final = json.loads(storage.read_text(storage.join(run, "eval_results.json")))
    assert final["step"] == STEPS[-1]
    assert newest == pytest.approx(final["metrics"], abs=1e-4)

    output = storage.join(root, "evaluated")
    assert evaluate.main(["--model_dir", run, "--checkpoint", "ckpt-2",
                          "--output_dir", output]) == 0
    out = capsys.readouterr().out
    assert f"predictions written to {output}" in out
    first = _printed_metrics(out)
    assert first.keys() == newest.keys() and first != newest  # another checkpoint's weights
    assert json.loads(storage.read_text(storage.join(output, "metrics_dev.json"))) == \
        pytest.approx(first, abs=1e-4)
    rows = storage.read_text(storage.join(output, "STS-B_dev_predictions.tsv")).splitlines()
    assert rows[0] == "index\tprediction\tlabel" and len(rows) == 1 + GLUE_LINES["dev"]

    predictions = storage.join(root, "predictions")
    assert predict.main(["--model_dir", run, "--output_dir", predictions]) == 0
    submission = storage.read_text(storage.join(predictions, "STS-B.tsv")).splitlines()
    assert submission[0] == "index\tprediction" and len(submission) == 1 + GLUE_LINES["test"]
    assert all(0.0 <= float(line.split("\t")[1]) <= 5.0 for line in submission[1:])

    # Evaluation beside the run, on a copy so that the run stays as trained.
    watched = storage.join(root, "watched")
    storage.copy_tree(run, watched)
    capsys.readouterr()
    assert evaluate.main(["--model_dir", watched, "--watch", "--poll_seconds", "0.1",
                          "--timeout", "60"]) == 0
    assert f"evaluated up to the run's final checkpoint (step {STEPS[-1]})" in \
        capsys.readouterr().out
    history = [json.loads(line) for line in storage.read_text(
        storage.join(watched, continuous_eval.HISTORY_FILE)).splitlines()]
    assert [entry["step"] for entry in history] == list(STEPS)
    assert history[0]["metrics"] == pytest.approx(first, abs=1e-4)
    best = json.loads(storage.read_text(storage.join(watched, BEST_DIR, RECORD_FILE)))
    assert best["value"] == max(entry["metrics"]["pearson"] for entry in history)
    assert storage.glob(storage.join(watched, "eval", "*.ckpt-6"))


def test_a_sweep_trains_each_run_and_keeps_the_best_on_object_storage(
        finetuned, no_local_writes, capsys):
    root, _, init, config, overrides = finetuned
    # The grid sets the learning rate.
    overrides = [item for item in overrides if not item.startswith("optimizer.learning_rate")]
    model_dir = storage.join(root, "sweep")
    summary = sweep.sweep(config, init, model_dir, [1e-3, 1e-5], [1], overrides,
                          run_training=train.main)
    assert [run["run"] for run in summary["runs"]] == ["lr0.001_epochs1", "lr1e-05_epochs1"]
    scores = {run["run"]: run["metrics"]["pearson"] for run in summary["runs"]}
    assert summary["best"] == max(scores, key=scores.get)
    assert json.loads(storage.read_text(storage.join(model_dir, "sweep_results.json"))) == summary
    for run in summary["runs"]:
        params = yaml.safe_load(storage.read_text(storage.join(run["model_dir"], "params.yaml")))
        assert float(params["optimizer"]["learning_rate"]) == run["learning_rate"]
        assert params["trainer"]["train_steps"] == GLUE_LINES["train"] // 8  # one epoch
    # Called again, it finds both runs finished and trains nothing.
    capsys.readouterr()

    def no_training(argv):
        raise AssertionError(f"trained again: {argv}")

    assert sweep.sweep(config, init, model_dir, [1e-3, 1e-5], [1], overrides,
                       run_training=no_training) == summary


def _encoder_arrays(encoder):
    return {slot.name: slot.variable.numpy() for slot in weight_map.encoder_slots(encoder)}


def test_a_run_converts_to_and_from_every_format_on_object_storage(
        finetuned, no_local_writes, capsys):
    root, run, *_ = finetuned
    trained = bert_tf.load_encoder(run)
    expected = _encoder_arrays(trained)
    converted = storage.join(root, "converted")
    for target in WRITABLE_FORMATS:
        written, back = storage.join(converted, target), storage.join(converted, f"{target}_back")
        capsys.readouterr()
        assert convert.main(["--input", run, "--to", target, "--output", written]) == 0
        assert json.loads(capsys.readouterr().out)["output"] == written
        assert loading.detect_format(written) == target
        assert convert.main(["--input", written, "--output", back]) == 0
        report = json.loads(capsys.readouterr().out)
        assert (report["input_format"], report["output"]) == (target, back)
        encoder = bert_tf.load_encoder(back)
        assert encoder.encoder_config == trained.encoder_config, target
        arrays = _encoder_arrays(encoder)
        for name, value in expected.items():
            np.testing.assert_array_equal(arrays[name], value, err_msg=f"{target}: {name}")
    # A .keras file (read only) on object storage converts too.
    keras_file = storage.join(converted, "encoder.keras")
    trained.save(keras_file)
    assert convert.main(["--input", keras_file, "--output", storage.join(converted, "keras")]) == 0
    arrays = _encoder_arrays(bert_tf.load_encoder(storage.join(converted, "keras")))
    for name, value in expected.items():
        np.testing.assert_array_equal(arrays[name], value, err_msg=f"keras: {name}")
