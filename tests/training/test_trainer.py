"""The trainer in-process on real text: summaries, checkpoints, faults, precision, init."""

import gc
import glob
import logging
import os
import weakref

import numpy as np
import pytest
import tensorflow as tf
import yaml
from conftest import REPO, checkpoint_weights, max_weight_difference
from tensorboard.compat.proto import event_pb2
from tensorflow.python.framework.func_graph import FuncGraph

import bert_tf
from bert_tf import tasks, train
from bert_tf.checkpoints import loading
from bert_tf.checkpoints.assign import CheckpointMismatchError
from bert_tf.training import trainer as trainer_lib
from bert_tf.training.checkpointing import stable_variable_dict

# Grouped so that TensorBoard shows the losses and accuracies first.
EVAL_TAGS = {"losses/loss", "losses/mlm_loss", "metrics/mlm_accuracy", "losses/nsp_loss",
             "metrics/nsp_accuracy"}
TRAIN_TAGS = EVAL_TAGS | {"optimizer/learning_rate", "optimizer/gradient_norm",
                          "optimizer/loss_scale", "throughput/examples_per_second",
                          "throughput/tokens_per_second", "throughput/steps_per_second"}


def read_events(logdir):
    """`{tag: [(step, value or text)]}` from every event file under `logdir`, in file order."""
    values = {}
    for path in sorted(glob.glob(os.path.join(logdir, "events.out.tfevents.*"))):
        for record in tf.data.TFRecordDataset(path):
            event = event_pb2.Event.FromString(record.numpy())
            for value in event.summary.value:
                array = tf.make_ndarray(value.tensor)
                values.setdefault(value.tag, []).append((event.step, array))
    return values


# For runs whose test reads no evaluation: no held-out split, so no final evaluation (it
# builds and traces the evaluation pipeline and step, about 5 s of a 4-step run).
NO_EVAL = {"eval_holdout_every": 0}


def train_in_process(config_path, model_dir, *overrides, init_checkpoint=None):
    task_class, experiment = tasks.load_experiment(config_path, overrides)
    return train.run(task_class, experiment, str(model_dir), init_checkpoint)


@pytest.mark.slow
def test_training_writes_summaries_checkpoints_and_a_loadable_run(write_config, tmp_path):
    run_dir = tmp_path / "run"
    assert train_in_process(write_config(), run_dir) == 0

    train_events = read_events(run_dir / "train")
    assert TRAIN_TAGS <= set(train_events)
    assert [step for step, _ in train_events["losses/loss"]] == [2, 4, 6, 8, 10, 12]
    losses = [float(v) for _, v in train_events["losses/mlm_loss"]]
    assert losses[-1] < losses[0]
    assert all(np.isfinite(float(v)) for _, v in train_events["optimizer/gradient_norm"])
    config_text = train_events["config"][0][1].item().decode()
    assert "task: pretraining" in config_text and "global_batch_size: 8" in config_text
    eval_events = read_events(run_dir / "eval")
    assert EVAL_TAGS <= set(eval_events)
    assert [step for step, _ in eval_events["metrics/mlm_accuracy"]] == [6, 12]

    params = yaml.safe_load((run_dir / "params.yaml").read_text())
    assert params["trainer"]["train_steps"] == 12
    assert params["model"]["encoder"]["hidden_size"] == 32
    # Every 4 steps, and at each evaluation (step 6) before it runs.
    assert sorted(os.path.basename(p) for p in glob.glob(str(run_dir / "ckpt-*.index"))) == [
        "ckpt-12.index", "ckpt-4.index", "ckpt-6.index", "ckpt-8.index"]

    # The run directory is itself a bert_tf model: its newest checkpoint loads,
    # with the weights the trainer restores by its own keys.
    pretrainer = bert_tf.load_pretrainer(str(run_dir))
    task_class, experiment = tasks.load_experiment(str(run_dir / "params.yaml"))
    restored = task_class(experiment).build_model()
    tf.train.Checkpoint(model_variables=stable_variable_dict(restored.variables)).read(
        str(run_dir / "ckpt-12")).expect_partial()
    assert len(pretrainer.trainable_variables) == len(restored.trainable_variables)
    for a, b in zip(pretrainer.trainable_variables, restored.trainable_variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


# A whole trainer run (about 30 s); the bar itself has fake-clock tests in test_progress.py.
@pytest.mark.long
def test_progress_follows_the_first_step_whatever_steps_per_loop(write_config, tmp_path,
                                                                 caplog):
    config = write_config(trainer={"train_steps": 8, "steps_per_loop": 4, "checkpoint_every": 4,
                                   "eval_every": 0}, data=NO_EVAL)
    with caplog.at_level(logging.INFO):
        assert train_in_process(config, tmp_path / "run") == 0
    messages = [record.getMessage() for record in caplog.records]
    progress = [i for i, message in enumerate(messages) if message.startswith("step ")
                and "/8  loss" in message]
    # Step 1 is reported before the first loop (steps 1-4) ends; the loops keep their ends.
    assert [messages[i].split("  ")[0] for i in progress] == ["step 1/8", "step 4/8", "step 8/8"]
    assert "first step" in messages[progress[0]]
    tracing = next(i for i, text in enumerate(messages) if "tracing the training step" in text)
    building = next(i for i, text in enumerate(messages) if text.startswith("building the"))
    assert building < tracing < progress[0]
    checkpoints = glob.glob(str(tmp_path / "run" / "ckpt-*.index"))
    assert sorted(os.path.basename(p) for p in checkpoints) == ["ckpt-4.index", "ckpt-8.index"]
    steps = [step for step, _ in read_events(tmp_path / "run" / "train")["losses/loss"]]
    assert steps == [4, 8]


# Three trainer runs (about 40 s); the same refusal of a changed key is met by
# test_run_guards.py (long) and the resume check's unit tests.
@pytest.mark.long
def test_resuming_with_another_model_shape_is_refused(write_config, tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert train_in_process(write_config(trainer={"train_steps": 4}, data=NO_EVAL), run_dir) == 0
    wider = write_config(data=NO_EVAL, model={"encoder": {"vocab_size": 30522, "hidden_size": 64,
                                            "num_layers": 2, "num_heads": 2,
                                            "intermediate_size": 64,
                                            "max_position_embeddings": 64}})
    assert train_in_process(wider, run_dir) == 1
    error = capsys.readouterr().err
    assert "model.encoder.hidden_size: 32 in the run, 64 in this config" in error
    # A longer run with the same model resumes fine.
    assert train_in_process(write_config(trainer={"train_steps": 6, "checkpoint_every": 2},
                                         data=NO_EVAL), run_dir) == 0
    assert tf.train.latest_checkpoint(str(run_dir)).endswith("ckpt-6")


@pytest.mark.slow
def test_non_finite_steps_are_skipped_then_rolled_back(write_config, tmp_path, capsys):
    run_dir = tmp_path / "run"
    config = write_config(trainer={"train_steps": 20, "eval_every": 0}, data=NO_EVAL)
    assert train_in_process(config, run_dir, "trainer.train_steps=4") == 0
    good = checkpoint_weights(run_dir)
    # A learning rate of 1e30 blows the weights up after one update; every
    # later step is non-finite and skipped, none is checkpointed, and after
    # five in a row the run rolls back to ckpt-4 and stops.
    assert train_in_process(config, run_dir, "optimizer.learning_rate=1e30") == 1
    error = capsys.readouterr().err
    assert "5 consecutive steps up to step 10 had a non-finite loss" in error
    assert "rolled back to" in error and "ckpt-4" in error
    assert tf.train.latest_checkpoint(str(run_dir)).endswith("ckpt-4")
    assert max_weight_difference(good, checkpoint_weights(run_dir)) == 0.0


@pytest.mark.slow
def test_gradient_accumulation_matches_the_full_batch(write_config, tmp_path, request):
    # Accumulation turns a process-wide Grappler option off; later tests in this
    # process get the options back.
    options = tf.config.optimizer.get_experimental_options()
    request.addfinalizer(lambda: tf.config.optimizer.set_experimental_options(
        {"arithmetic_optimization": options.get("arithmetic_optimization", True)}))
    # Width 256 (word embeddings as wide as BERT-mini's) and loops of 4 steps: TF's
    # arithmetic optimizer broke the accumulated sums of such a model within the first
    # loop of several steps (AlreadyExistsError); width 128 or loops of 1-2 steps did not.
    no_dropout = {"encoder": {"vocab_size": 30522, "hidden_size": 256, "num_layers": 1,
                              "num_heads": 2, "intermediate_size": 64,
                              "max_position_embeddings": 64, "hidden_dropout": 0.0,
                              "attention_dropout": 0.0}}
    config = write_config(model=no_dropout, trainer={"train_steps": 9, "steps_per_loop": 4,
                                                     "checkpoint_every": 9, "eval_every": 0},
                          data=NO_EVAL)
    assert train_in_process(config, tmp_path / "full") == 0
    assert train_in_process(config, tmp_path / "accumulated",
                            "trainer.gradient_accumulation_steps=4") == 0
    difference = max_weight_difference(checkpoint_weights(tmp_path / "full"),
                                       checkpoint_weights(tmp_path / "accumulated"))
    assert difference < 1e-5


@pytest.mark.slow
# float16 on a CPU: its loss scaling has a fast test in test_accelerator_paths.py.
@pytest.mark.parametrize("precision", ["mixed_bfloat16",
                                       pytest.param("mixed_float16", marks=pytest.mark.long)])
def test_mixed_precision_trains(write_config, tmp_path, precision):
    config = write_config(trainer={"train_steps": 4, "eval_every": 0},
                          runtime={"mixed_precision": precision}, data=NO_EVAL)
    assert train_in_process(config, tmp_path / "run") == 0
    events = read_events(tmp_path / "run" / "train")
    scales = [float(v) for _, v in events["optimizer/loss_scale"]]
    losses = [float(v) for _, v in events["losses/loss"]]
    assert all(np.isfinite(losses))
    if precision == "mixed_float16":
        assert scales[0] == 2.0 ** 15  # dynamic loss scaling is on
    else:
        assert scales == [1.0, 1.0]
    weights = checkpoint_weights(tmp_path / "run")
    assert all(w.dtype == np.float32 for k, w in weights.items() if "kernel" in k)


@pytest.mark.long  # two trainer runs, a simulated move to a GPU (about 30 s)
def test_auto_precision_is_recorded_and_chosen_again_on_resume(write_config, tmp_path,
                                                               monkeypatch, caplog):
    from bert_tf.training import precision

    config = write_config(trainer={"train_steps": 4, "eval_every": 0, "checkpoint_every": 2,
                                   "steps_per_loop": 2},
                          runtime={"mixed_precision": "auto"}, data=NO_EVAL)
    run_dir = tmp_path / "run"
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"avx2"}))
    assert train_in_process(config, run_dir, "trainer.train_steps=2") == 0
    params = yaml.safe_load((run_dir / "params.yaml").read_text())
    assert params["runtime"]["mixed_precision"] == "float32"
    # The run moves to a GPU with float16 tensor cores: it resumes in mixed_float16, and
    # its loss scale starts high, not at the float32 run's unused 1.0 (float16 would underflow).
    monkeypatch.setattr(precision, "_device_kind", lambda strategy: "gpu")
    monkeypatch.setattr(precision, "_slowest_gpu_capability", lambda: (7, 0))
    with caplog.at_level(logging.INFO):
        assert train_in_process(config, run_dir) == 0
    assert any(f"resumed from {run_dir / 'ckpt-2'}" in r.getMessage() for r in caplog.records)
    params = yaml.safe_load((run_dir / "params.yaml").read_text())
    assert params["runtime"]["mixed_precision"] == "mixed_float16"
    scales = dict(read_events(run_dir / "train")["optimizer/loss_scale"])
    assert float(scales[2]) == 1.0 and float(scales[4]) >= 2.0 ** 14


@pytest.mark.long  # a trainer run under the TensorFlow profiler (about 12-30 s)
def test_profiler_traces_the_requested_steps(write_config, tmp_path):
    config = write_config(trainer={"train_steps": 4, "eval_every": 0, "profile_steps": [2, 4]},
                          data=NO_EVAL)
    assert train_in_process(config, tmp_path / "run") == 0
    assert glob.glob(str(tmp_path / "run" / "train" / "plugins" / "profile" / "*" / "*.xplane.pb"))


@pytest.mark.parametrize("checkpoint_format", ["bert_tf", "google", "hf"])
def test_init_checkpoint_loads_weights_of_every_format(write_config, tmp_path, checkpoint_format):
    task_class, experiment = tasks.load_experiment(write_config())
    task = task_class(experiment)
    task.validate()
    source = task.build_model()
    loading.save(source, str(tmp_path / "source"), format=checkpoint_format,
                 vocab_file=experiment.data.vocab_file, lower_case=True)
    target = task.build_model()
    loaded, fresh = task.initialize(target, str(tmp_path / "source"))
    assert fresh == [] and len(loaded) == len(target.trainable_variables)
    for a, b in zip(source.trainable_variables, target.trainable_variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_init_checkpoint_of_another_shape_names_the_field(write_config, tmp_path):
    task_class, experiment = tasks.load_experiment(write_config())
    wide_class, wide = tasks.load_experiment(write_config(), ["model.encoder.hidden_size=64"])
    loading.save(wide_class(wide).build_model(), str(tmp_path / "wide"))
    task = task_class(experiment)
    with pytest.raises(CheckpointMismatchError, match="hidden_size: checkpoint 64 vs config 32"):
        task.initialize(task.build_model(), str(tmp_path / "wide"))


def test_train_cli_rejects_unknown_keys_and_bad_types(write_config, capsys):
    config = write_config()
    assert train.main(["--config", config, "--model_dir", "unused",
                       "--set", "trainer.train_stepz=3"]) == 2
    assert "trainer.train_stepz" in capsys.readouterr().err
    assert train.main(["--config", config, "--model_dir", "unused",
                       "--set", "trainer.train_steps=many"]) == 2
    assert "trainer.train_steps must be int, got str 'many'" in capsys.readouterr().err


def test_run_with_an_empty_corpus_names_the_file(write_config, tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    config = write_config(data={"train_files": [str(empty)]})
    assert train_in_process(config, tmp_path / "run") == 1
    assert "the corpus is empty" in capsys.readouterr().err


def _traced_loops():
    """Weak references to every traced train and eval loop graph alive in this process."""
    return {id(graph): weakref.ref(graph) for graph in gc.get_objects()
            if isinstance(graph, FuncGraph) and graph.name in ("_train_loop", "_eval_loop")}


@pytest.mark.long  # two trainer runs and a heap check (about 20 s)
def test_trainer_result_fingerprint_is_of_the_weights_and_its_graphs_are_freed(write_config,
                                                                               tmp_path):
    task_class, experiment = tasks.load_experiment(write_config(), ["trainer.train_steps=2"])
    from bert_tf.training import strategies
    task = task_class(experiment)
    trainer = trainer_lib.Trainer(task, experiment, str(tmp_path / "run"),
                                  strategies.create_strategy("cpu"))
    before = _traced_loops()
    result = trainer.train()
    assert result.weights_fingerprint == trainer_lib.weights_fingerprint(
        trainer.model.trainable_variables)
    trainer.model.trainable_variables[0].assign_add(tf.ones_like(trainer.model.trainable_variables[0]))
    assert result.weights_fingerprint != trainer_lib.weights_fingerprint(
        trainer.model.trainable_variables)
    traced = [ref for key, ref in _traced_loops().items() if key not in before]
    assert len(traced) == 2
    # A process that trains again and again (a sweep, a notebook) must not keep every
    # run's traced loops: TensorFlow's gradient registry held them before.
    del task, trainer
    gc.collect()
    assert [ref() for ref in traced] == [None, None]


def test_a_stop_request_ends_the_loop_before_its_next_step(write_config, tmp_path):
    task_class, experiment = tasks.load_experiment(write_config())
    from bert_tf.training import strategies
    trainer = trainer_lib.Trainer(task_class(experiment), experiment, str(tmp_path / "run"),
                                  strategies.create_strategy("cpu"))
    trainer.train_step.train_loop(trainer.iterator, tf.constant(3))
    assert int(trainer.step.numpy()) == 3
    trainer.stop_requested.assign(True)
    trainer.train_step.train_loop(trainer.iterator, tf.constant(5))
    assert int(trainer.step.numpy()) == 4  # the first step of a loop always runs


def test_train_epochs_on_a_streamed_corpus_is_refused_naming_the_key(write_config, tmp_path,
                                                                     capsys):
    assert train_in_process(write_config(), tmp_path / "run", "trainer.train_epochs=1") == 1
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: trainer.train_epochs=1 ") and len(error.splitlines()) == 1
    assert "'pretraining' task streams its data: set trainer.train_steps" in error
    assert not (tmp_path / "run").exists()  # refused before anything was written


@pytest.mark.parametrize("sentence_pairs", [True, False])
def test_mlm_only_keeps_the_sentence_pairs_unless_told_otherwise(write_config, sentence_pairs):
    overrides = ["model.use_nsp=false", f"data.sentence_pairs={str(sentence_pairs).lower()}"]
    task_class, experiment = tasks.load_experiment(write_config(), overrides)
    task = task_class(experiment)
    task.validate()
    inputs, labels = next(iter(task.train_dataset(None, 16)))
    # The paper's "No NSP" drops the loss, not the pairs: segment B is still there.
    assert bool(tf.reduce_any(inputs["segment_ids"] == 1)) == sentence_pairs
    assert set(labels) == {"masked_lm_ids", "masked_lm_weights"}


def test_nsp_without_sentence_pairs_is_refused_naming_both_keys(write_config, tmp_path, capsys):
    assert train_in_process(write_config(), tmp_path / "run", "data.sentence_pairs=false") == 1
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: model.use_nsp=true needs sentence pairs, but "
                            "data.sentence_pairs=false")
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
@pytest.mark.long
def test_an_mlm_only_run_trains_evaluates_and_fine_tunes(write_config, tmp_path, shared_file):
    run_dir = tmp_path / "mlm_only"
    assert train_in_process(write_config(), run_dir, "model.use_nsp=false",
                            "trainer.train_steps=6") == 0
    eval_events = read_events(run_dir / "eval")
    assert {"losses/nsp_loss", "metrics/nsp_accuracy"}.isdisjoint(eval_events)
    (_, loss), = eval_events["losses/loss"]
    (_, mlm_loss), = eval_events["losses/mlm_loss"]
    assert float(loss) == pytest.approx(float(mlm_loss))
    # Its encoder (and untrained pooler) start a fine-tuning run.
    glue_dir = os.path.dirname(os.path.dirname(shared_file("glue", "MRPC", "train.tsv")))
    assert train_in_process(
        os.path.join(REPO, "configs", "finetune", "glue_mrpc.yaml"), tmp_path / "mrpc",
        f"data.data_dir={glue_dir}", "data.max_train_examples=16",
        "data.max_eval_examples=16", "data.max_seq_length=32", "trainer.global_batch_size=8",
        "trainer.train_epochs=1", init_checkpoint=str(run_dir)) == 0


def test_masking_fractions_that_do_not_sum_to_one_are_refused_naming_the_keys(
        write_config, tmp_path, capsys):
    code = train_in_process(write_config(), tmp_path / "run", "data.mask_token_fraction=0.9",
                            "data.random_token_fraction=0.2")
    assert code == 1
    error = capsys.readouterr().err.strip()
    assert error == ("error: data.mask_token_fraction, data.keep_token_fraction, "
                     "data.random_token_fraction must sum to 1; got data.mask_token_fraction="
                     "0.9, data.keep_token_fraction=0.1, data.random_token_fraction=0.2 "
                     "(sum 1.2)")
    assert not (tmp_path / "run").exists()
