"""The task protocol: a task written outside bert_tf registers and trains through the trainer.

The test task, "find_the_mark", classifies random token sequences by whether
they contain one marked token; its data is made in memory, so the test
proves the seam between `Task` and the trainer, not any real task.
"""

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import yaml

from bert_tf import config as config_lib
from bert_tf import evaluate, tasks, train
from bert_tf.checkpoints import native
from bert_tf.checkpoints.task_record import TaskRecord
from bert_tf.config import ConfigError
from bert_tf.models import BertClassifier, BertEncoder
from bert_tf.models.encoder_config import EncoderConfig
from bert_tf.tasks.base import (
    Task,
    check_data_fits_encoder,
    encoder_config_differences,
    experiment_class,
)
from bert_tf.text import tokenizer_contract
from bert_tf.training import precision, strategies
from bert_tf.training import trainer as trainer_lib

SEQ = 16
MARK = 50  # the token id whose presence is the label
FIRST_WORD = 10  # ids below are [PAD], [unused*], [UNK], [CLS], [SEP], [MASK]


def tiny_encoder():
    return EncoderConfig(vocab_size=100, hidden_size=16, num_layers=2, num_heads=2,
                         intermediate_size=32, max_position_embeddings=SEQ)


@dataclasses.dataclass
class MarkModelConfig:
    encoder: EncoderConfig = dataclasses.field(default_factory=tiny_encoder)


@dataclasses.dataclass
class MarkDataConfig:
    # No vocabulary: the examples are made of ids (see MarkTask.dataset).
    vocab_file: str = ""
    lower_case: bool = True
    max_seq_length: int = SEQ
    # Examples per split; half carry MARK.
    num_examples: int = 64
    seed: int = 0


MarkExperiment = experiment_class("MarkExperiment", "find_the_mark", MarkModelConfig,
                                  MarkDataConfig, "The toy task's experiment.")


class MarkTask(Task):
    """Is token MARK in the sequence? Two classes, in-memory data, host evaluation."""

    config_class = MarkExperiment
    name = "find_the_mark"
    supports_evaluation = True
    main_metric = "accuracy"
    sum_keys = ("loss_sum", "correct", "count", "tokens")

    def validate(self):
        data = self.experiment.data
        if not data.vocab_file:
            raise ValueError("data.vocab_file is not set")
        self._tokenizer_contract = check_data_fits_encoder(data, self.experiment.model.encoder)

    @property
    def vocab_file(self):
        return self.experiment.data.vocab_file

    def task_record(self):
        return TaskRecord(kind="classifier", name=self.name, max_seq_length=SEQ,
                          label_names=("absent", "present"), text_inputs=1)

    def model_differences(self, old, new):
        return encoder_config_differences(old.encoder, new.encoder)

    def build_model(self, dtype=None):
        encoder = BertEncoder.from_encoder_config(self.experiment.model.encoder, dtype=dtype)
        return BertClassifier(encoder, num_classes=2)

    def initialize(self, model, path):
        raise ValueError("find_the_mark starts from scratch")

    def _examples(self):
        data = self.experiment.data
        rng = np.random.default_rng(data.seed)
        ids = rng.integers(FIRST_WORD, 100, size=(data.num_examples, SEQ), dtype=np.int32)
        ids[ids == MARK] = MARK + 1
        labels = np.arange(data.num_examples, dtype=np.int32) % 2
        marked = np.flatnonzero(labels)
        ids[marked, rng.integers(0, SEQ, size=len(marked))] = MARK
        inputs = {"token_ids": ids, "segment_ids": np.zeros_like(ids),
                  "padding_mask": np.ones_like(ids)}
        return inputs, {"label": labels}

    @property
    def num_train_examples(self):
        return self.experiment.data.num_examples

    def train_dataset(self, input_context, global_batch_size):
        batch = (input_context.get_per_replica_batch_size(global_batch_size)
                 if input_context is not None else global_batch_size)
        dataset = tf.data.Dataset.from_tensor_slices(self._examples())
        return dataset.shuffle(64, seed=self.experiment.data.seed).repeat().batch(
            batch, drop_remainder=True)

    def loss_denominators(self, labels):
        return {"count": tf.cast(tf.shape(labels["label"])[0], tf.float32)}

    def compute_loss(self, labels, outputs, inputs, denominators):
        sums = self.metric_sums(labels, outputs, inputs)
        return sums["loss_sum"] / tf.maximum(denominators["count"], 1.0), sums

    def metric_sums(self, labels, outputs, inputs):
        logits = tf.cast(outputs["logits"], tf.float32)  # [B, 2]
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels["label"], logits)
        hits = tf.equal(tf.argmax(logits, -1, output_type=tf.int32), labels["label"])
        return {"loss_sum": tf.reduce_sum(losses),
                "correct": tf.reduce_sum(tf.cast(hits, tf.float32)),
                "count": tf.cast(tf.shape(logits)[0], tf.float32),
                "tokens": tf.reduce_sum(tf.cast(inputs["padding_mask"], tf.float32))}

    def metrics(self, sums):
        count = max(float(sums["count"]), 1e-9)
        return {"loss": float(sums["loss_sum"]) / count,
                "accuracy": float(sums["correct"]) / count}

    def evaluate_model(self, predict_fn, sources=None, output_dir=None, batch_size=64):
        inputs, labels = self._examples()
        logits = predict_fn({key: tf.constant(value) for key, value in inputs.items()})["logits"]
        predicted = np.argmax(np.asarray(logits), axis=-1)
        return {"accuracy": float(np.mean(predicted == labels["label"]))}


@pytest.fixture
def registered(monkeypatch):
    """MarkTask registered for this test only."""
    monkeypatch.setattr(tasks, "TASKS", tasks.TASKS.copy())
    tasks.register_task(MarkTask)


@pytest.fixture
def vocab_file(tmp_path):
    """A 100-token vocab in BERT's layout."""
    words = (["[PAD]"] + [f"[unused{i}]" for i in range(5)] + ["[UNK]", "[CLS]", "[SEP]",
             "[MASK]"] + [f"word{i}" for i in range(100 - FIRST_WORD)])
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(words) + "\n")
    return str(path)


def test_a_registered_task_trains_through_the_trainer(registered, vocab_file, tmp_path):
    config = tmp_path / "mark.yaml"
    config.write_text(yaml.safe_dump({
        "task": "find_the_mark",
        "data": {"vocab_file": vocab_file},
        "optimizer": {"learning_rate": 1e-3, "warmup_steps": 1},
        "trainer": {"train_epochs": 2, "global_batch_size": 16, "steps_per_loop": 4,
                    "checkpoint_every": 4, "eval_every": 0},
        "runtime": {"strategy": "cpu", "deterministic": True},
    }))
    task_class, experiment = tasks.load_experiment(str(config))
    assert task_class is MarkTask
    run_dir = tmp_path / "run"
    assert train.run(task_class, experiment, str(run_dir)) == 0

    # 2 epochs of the task's 64 examples at batch 16.
    params = yaml.safe_load((run_dir / "params.yaml").read_text())
    assert params["trainer"]["train_steps"] == 8
    # The host evaluation ran at the end of training.
    results = json.loads((run_dir / "eval_results.json").read_text())
    assert results["step"] == 8 and 0.0 <= results["metrics"]["accuracy"] <= 1.0
    # The run records the task's record and tokenizer contract, and loads as a model.
    model, metadata = native.load_model(str(run_dir))
    assert type(model).__name__ == "BertClassifier"
    assert metadata["task"] == MarkTask(experiment).task_record()
    assert metadata["tokenizer"] == tokenizer_contract.contract_from_vocab(vocab_file, True)


def test_training_and_evaluation_resolve_auto_to_the_same_policy(
        registered, vocab_file, tmp_path, monkeypatch):
    # A CPU with native bf16, whatever this machine has: auto must not mean float32 here.
    policy = "mixed_bfloat16"
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"amx_bf16"}))
    built = []  # the dtype each path builds its model with

    def build_model(self, dtype=None):
        built.append(dtype)
        return original(self, dtype)

    original = MarkTask.build_model
    monkeypatch.setattr(MarkTask, "build_model", build_model)
    config = tmp_path / "mark.yaml"
    config.write_text(yaml.safe_dump({
        "task": "find_the_mark",
        "data": {"vocab_file": vocab_file},
        "trainer": {"train_steps": 1, "global_batch_size": 8, "steps_per_loop": 1,
                    "checkpoint_every": 1, "eval_every": 0},
        "runtime": {"strategy": "cpu", "mixed_precision": "auto"},
    }))
    run_dir = tmp_path / "run"
    assert train.run(*tasks.load_experiment(str(config)), str(run_dir)) == 0
    params = yaml.safe_load((run_dir / "params.yaml").read_text())
    assert params["runtime"]["mixed_precision"] == policy

    _, model, _ = evaluate.load_run(str(run_dir), ["runtime.mixed_precision=auto"])
    assert model.encoder.dtype_policy.name == policy
    assert built == [precision.model_dtype(policy)] * 2


@pytest.mark.slow
def test_the_experiment_is_resolved_once_then_validated_then_checked_against_the_run(
        registered, vocab_file, tmp_path, monkeypatch, capsys):
    # `auto` on a CPU with native bf16, whatever this machine has; 1 epoch of 32 examples.
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"amx_bf16"}))
    config = tmp_path / "mark.yaml"
    config.write_text(yaml.safe_dump({
        "task": "find_the_mark",
        "data": {"vocab_file": vocab_file, "num_examples": 32},
        "trainer": {"train_epochs": 1, "global_batch_size": 16, "steps_per_loop": 2,
                    "checkpoint_every": 2, "eval_every": 0},
        "runtime": {"strategy": "cpu", "mixed_precision": "auto"},
    }))
    run_dir = tmp_path / "run"
    task_class, experiment = tasks.load_experiment(str(config))
    task = task_class(experiment)
    trainer = trainer_lib.Trainer(task, experiment, str(run_dir),
                                  strategies.create_strategy("cpu"))
    # One experiment, the task's and the trainer's, with every value decided.
    assert trainer.experiment is task.experiment
    assert trainer.experiment.runtime.mixed_precision == "mixed_bfloat16"
    assert trainer.experiment.trainer.train_steps == 2
    assert trainer.train().step == 2
    params = yaml.safe_load((run_dir / "params.yaml").read_text())
    assert config_lib.from_dict(MarkExperiment, params) == trainer.experiment

    # The run holds a model of 100 tokens: another model is refused by the resume check...
    assert train.run(*tasks.load_experiment(str(config), ["model.encoder.hidden_size=32"]),
                     str(run_dir)) == 1
    assert "holds a run with another model" in capsys.readouterr().err
    # ...but a config that does not fit its own vocabulary is refused for that first.
    assert train.run(*tasks.load_experiment(str(config), ["model.encoder.vocab_size=120"]),
                     str(run_dir)) == 1
    (error,) = capsys.readouterr().err.strip().splitlines()
    assert error == (f"error: data.vocab_file {vocab_file} has 100 tokens but "
                     "model.encoder.vocab_size is 120")

def test_a_task_missing_an_abstract_method_cannot_be_instantiated():
    methods = {key: value for key, value in vars(MarkTask).items()
               if key != "compute_loss" and not key.startswith(("__", "_abc"))}
    incomplete = type("NoLossTask", (Task,), methods)
    with pytest.raises(TypeError, match="compute_loss"):
        incomplete(MarkExperiment())


def test_register_task_checks_what_it_registers(monkeypatch):
    monkeypatch.setattr(tasks, "TASKS", tasks.TASKS.copy())
    with pytest.raises(TypeError, match="subclass of bert_tf.tasks.base.Task"):
        tasks.register_task(dict)
    glue = tasks.task_class("glue")
    with pytest.raises(ValueError, match="task 'glue' is registered already"):
        tasks.register_task(glue)
    renamed = type("Renamed", (MarkTask,), {"name": "renamed"})
    with pytest.raises(ValueError, match="MarkExperiment.task must default to 'renamed'"):
        tasks.register_task(renamed)


def test_built_in_tasks_are_imported_when_first_named():
    # In a fresh process: importing the registry imports no task (nor TensorFlow).
    code = (
        "import sys\n"
        "from bert_tf import tasks\n"
        "from bert_tf.registry import LazyEntry\n"
        "assert 'tensorflow' not in sys.modules\n"
        "assert all(isinstance(entry, LazyEntry) for entry in tasks.TASKS.values())\n"
        "print(sorted(tasks.TASKS))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == str(
        ["glue", "ner", "ner_features", "pretraining", "squad", "swag"])
    # Named, a task is imported and takes its entry's place.
    swag = tasks.task_class("swag")
    assert swag.name == "swag" and tasks.TASKS["swag"] is swag


def test_an_unknown_task_is_a_config_error():
    with pytest.raises(ConfigError, match=r"unknown task 'nope'; expected one of \['glue'"):
        tasks.task_class("nope")
