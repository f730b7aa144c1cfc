"""The accelerator path on CPU: XLA, float16 loss scaling and TPU-shaped train steps.

No GPU or TPU runs TensorFlow on the test machines, so what `--strategy` sends
to one is run here, on the CPU, for every task kind:

- XLA (`runtime.jit_compile: true`, the default on GPUs and TPUs) trains as the
  default path does, and its checkpoint resumes exactly;
- `mixed_float16` (GPUs of compute capability 7.x, with XLA as there): the
  loss scale grows and backs off, a skipped step changes nothing, and the
  losses track float32;
- the step a TPU compiles: static input shapes, no string op or host
  callback, and it lowers to XLA with `jit_compile=True`.

Mirrored replicas are tested with XLA off (test_strategies.py says why).
Every run starts from the same seed with dropout off, so runs differ only by
the path under test. Tiny models (1 layer, hidden 32) on the real data keep
all of this within seconds per kind; tracing and XLA compilation dominate.
"""

import dataclasses
import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.framework import op_def_registry

from bert_tf import config as config_lib
from bert_tf import tasks
from bert_tf.training import fixed_shapes
from bert_tf.training import trainer as trainer_lib
from tests.helpers import require_shared

SEED = 3
# Every kind of training the trainer runs: (task, data section).
KINDS = ("pretraining_packed", "pretraining_unpacked", "classifier", "regressor",
         "span_labeler", "token_classifier", "multiple_choice")
# The fast suite runs the kinds with the most distinct steps (packed MLM+NSP, and
# [B, C, S] choices); the second test command (-m long) repeats the tests on the rest.
FAST_KINDS = ("pretraining_packed", "multiple_choice")
KIND_CASES = [kind if kind in FAST_KINDS else pytest.param(kind, marks=pytest.mark.long)
              for kind in KINDS]
# Steps per train-loop call: one step at a time, then a loop of two (steps_per_loop > 1).
LOOPS = (1, 1, 2)
# XLA fuses elementwise ops, orders reductions its own way and has its own exp,
# tanh and erf, so float32 results differ from TensorFlow's kernels in the last
# bits (observed: <= 1.2e-7 relative over these 4 steps, every kind); a wrong op
# or a missed update of one weight moves the loss by more than 1e-4.
XLA_RTOL = 1e-5
# float16 keeps 11 significant bits (about 5e-4 relative per rounding), but
# near initialisation the MLM loss is about log(vocab size) and the rounding of
# the small logits barely moves it (observed: 5e-6 relative over these 4 steps).
FLOAT16_RTOL = 1e-4
# TensorFlow ops that call back into the Python host: a TPU cannot run them in its step.
HOST_CALLBACK_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})


def _encoder():
    return {"vocab_size": 30522, "hidden_size": 32, "num_layers": 1, "num_heads": 2,
            "intermediate_size": 64, "max_position_embeddings": 64, "hidden_dropout": 0.0,
            "attention_dropout": 0.0}


def _experiment_values(kind, corpus_dir):
    """(task name, experiment dict) of a tiny run of `kind` on the shared data."""
    vocab = require_shared("vocab", "bert-base-uncased-vocab.txt")
    trainer = {"train_steps": 100, "global_batch_size": 4, "steps_per_loop": 2,
               "checkpoint_every": 2, "eval_every": 0}
    if kind.startswith("pretraining"):
        model = {"encoder": _encoder()}
        data = {"train_files": [f"{corpus_dir}/*.txt"], "vocab_file": vocab,
                "max_seq_length": 32, "max_predictions_per_seq": 5, "documents_per_window": 8,
                "shuffle_buffer_size": 64, "eval_holdout_every": 5,
                "max_sequences_per_row": 3 if kind == "pretraining_packed" else 1}
        name = "pretraining"
    else:
        model = {"encoder": _encoder(), "head_dropout": 0.0}
        # Fixed shapes, as TPUs need them (dynamic padding cuts batches to their longest row).
        data = {"vocab_file": vocab, "lower_case": True, "max_seq_length": 32,
                "dynamic_padding": False, "max_train_examples": 16, "max_eval_examples": 4}
        if kind in ("classifier", "regressor"):
            name = "glue"
            folder = "MRPC" if kind == "classifier" else "STS-B"
            train_file = require_shared("glue", folder, "train.tsv")
            data.update(task_name="mrpc" if kind == "classifier" else "stsb",
                        data_dir=os.path.dirname(os.path.dirname(train_file)))
        elif kind == "span_labeler":
            name = "squad"
            squad = require_shared("squad", "dev-v1.1.json")
            data.update(train_file=squad, eval_file=squad, max_seq_length=64, doc_stride=32,
                        max_query_length=16)
        elif kind == "token_classifier":
            name = "ner"
            conll = require_shared("conll2003", "eng.testa")
            data.update(train_file=conll, eval_files=[conll])
        else:
            name = "swag"
            swag = require_shared("swag", "swag_sample_hf_format.jsonl")
            data.update(train_file=swag, eval_file=swag)
    return name, {"task": name, "model": model, "data": data,
                  "optimizer": {"learning_rate": 1e-3, "warmup_steps": 1},
                  "trainer": trainer,
                  "runtime": {"strategy": "cpu", "deterministic": True, "seed": SEED}}


def build_task(kind, corpus_dir):
    """The resolved task of a tiny run of `kind`; its training pipeline is built once.

    Every trainer of the task iterates the same `tf.data` pipeline (in-graph
    tokenization is costly to trace); `Runs.same_batches` starts them alike.
    """
    name, values = _experiment_values(kind, corpus_dir)
    task_class = tasks.task_class(name)
    task = task_class(config_lib.from_dict(task_class.config_class, values))
    task.resolve()
    datasets, build = {}, task.train_dataset

    def train_dataset(input_context, global_batch_size):
        # The default strategy: one pipeline, whatever the context says.
        if global_batch_size not in datasets:
            datasets[global_batch_size] = build(input_context, global_batch_size)
        return datasets[global_batch_size]

    task.train_dataset = train_dataset
    return task


def build_trainer(task, model_dir, jit_compile, precision="float32"):
    """A `Trainer` of `task` under the default strategy, weights drawn from `SEED`."""
    import keras

    experiment = task.experiment
    runtime = dataclasses.replace(experiment.runtime, jit_compile=jit_compile,
                                  mixed_precision=precision)
    keras.utils.set_random_seed(SEED)
    return trainer_lib.Trainer(task, dataclasses.replace(experiment, runtime=runtime),
                               str(model_dir), tf.distribute.get_strategy())


def run_loops(trainer, loops):
    """The summed loss of each `train_loop` call of `loops` steps."""
    return [float(trainer.train_step.train_loop(trainer.iterator, tf.constant(steps))["loss"])
            for steps in loops]


def state(trainer):
    """Copies of the model's and the optimizer's variables, the loss scale and the step."""
    variables = (trainer.model.variables + trainer.optimizer.variables
                 + [trainer.loss_scale.scale, trainer.loss_scale.good_steps, trainer.step])
    return [v.numpy().copy() for v in variables]


class Runs:
    """Tasks of each kind and their trainers, each trained through `LOOPS` once per file."""

    def __init__(self, request, tmp_path_factory):
        self._request = request
        self.tmp = tmp_path_factory
        self._tasks = {}
        self._runs = {}
        self._input_start = {}

    def task(self, kind):
        if kind not in self._tasks:
            corpus = (self._request.getfixturevalue("bert_corpus")
                      if kind.startswith("pretraining") else "")
            self._tasks[kind] = build_task(kind, corpus)
        return self._tasks[kind]

    def same_batches(self, kind, trainer):
        """Starts `trainer`'s input where the first trainer of `kind` started.

        A seeded shuffle that reshuffles every epoch gives each new iterator
        of a pipeline another order; the saved input position (as a resumed
        run restores it) gives every trainer of a kind the same batches.
        """
        checkpoint = tf.train.Checkpoint(input=trainer.iterator)
        if kind not in self._input_start:
            path = str(self.tmp.mktemp(f"{kind}_input") / "start")
            self._input_start[kind] = checkpoint.write(path)
        else:
            checkpoint.read(self._input_start[kind]).assert_consumed()

    def get(self, kind, jit_compile):
        """(trainer, losses per loop of `LOOPS`, resumed); `resumed` only for XLA.

        After the first two steps the XLA run saves a checkpoint, then runs steps
        3-4, restores the checkpoint and runs them again; `resumed` says whether
        the weights, optimizer slots and losses came out bit-identical. The
        trainer is reused with its compiled step, so any state the checkpoint
        missed would keep its step-4 value and the rerun would differ.
        """
        key = (kind, jit_compile)
        if key not in self._runs:
            model_dir = self.tmp.mktemp(f"{kind}_{'xla' if jit_compile else 'tf'}")
            trainer = build_trainer(self.task(kind), model_dir, jit_compile)
            self.same_batches(kind, trainer)
            losses = run_loops(trainer, LOOPS[:-1])
            resumed = None
            if jit_compile:
                trainer.checkpoint.save()
            losses += run_loops(trainer, LOOPS[-1:])
            if jit_compile:
                after = state(trainer)
                assert trainer.checkpoint.restore_latest().endswith("ckpt-2")
                again = run_loops(trainer, LOOPS[-1:])
                resumed = again == losses[-1:] and all(
                    np.array_equal(a, b) for a, b in zip(after, state(trainer)))
            self._runs[key] = trainer, losses, resumed
        return self._runs[key]


@pytest.fixture(scope="module")
def runs(request, tmp_path_factory):
    return Runs(request, tmp_path_factory)


# -- XLA -------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("kind", KIND_CASES)
def test_xla_trains_as_the_default_path_and_resumes_exactly(runs, kind):
    _, default_losses, _ = runs.get(kind, jit_compile=False)
    trainer, xla_losses, resumed = runs.get(kind, jit_compile=True)
    assert trainer.train_step._forward_backward is not trainer.train_step._forward_backward_eager
    assert all(np.isfinite(default_losses))
    np.testing.assert_allclose(xla_losses, default_losses, rtol=XLA_RTOL)
    assert resumed


# -- float16 ---------------------------------------------------------------------


def test_loss_scale_doubles_after_good_steps_and_halves_down_to_one():
    from bert_tf.training.loss_scale import LossScale

    scale = LossScale(enabled=True, initial_scale=4.0, growth_interval=2)
    history = []
    for finite in (True, True, True, False, False, False, False, True):
        scale.update(tf.constant(finite))
        history.append((float(scale.scale.numpy()), int(scale.good_steps.numpy())))
    assert history == [(4.0, 1), (8.0, 0), (8.0, 1), (4.0, 0), (2.0, 0), (1.0, 0), (1.0, 0),
                       (1.0, 1)]
    assert bool(scale.at_minimum)  # a non-finite step now is a failure, not the scale's job
    assert LossScale(enabled=False).scale_loss(3.0) == 3.0


@pytest.mark.slow
def test_float16_with_xla_scales_the_loss_skips_overflows_and_tracks_float32(runs, tmp_path):
    _, float32_losses, _ = runs.get("pretraining_packed", jit_compile=False)
    trainer = build_trainer(runs.task("pretraining_packed"), tmp_path, jit_compile=True,
                            precision="mixed_float16")
    runs.same_batches("pretraining_packed", trainer)
    assert trainer.model.encoder.dtype_policy.name == "mixed_float16"
    scale = trainer.loss_scale
    scale.growth_interval = 2  # read when the step is traced: grow every 2 good steps
    assert float(scale.scale.numpy()) == 2.0 ** 15
    losses = run_loops(trainer, LOOPS)
    np.testing.assert_allclose(losses, float32_losses, rtol=FLOAT16_RTOL)
    assert float(scale.scale.numpy()) == 2.0 ** 17  # doubled after steps 2 and 4

    # An overflow: the scaled gradients exceed float16's 65504 and turn infinite.
    scale.scale.assign(2.0 ** 40)
    before = state(trainer)
    sums = trainer.train_step.train_loop(trainer.iterator, tf.constant(1))
    after = state(trainer)
    assert float(sums["finite_steps"]) == 0.0 and float(sums["failed_steps"]) == 0.0
    assert float(scale.scale.numpy()) == 2.0 ** 39 and int(scale.good_steps.numpy()) == 0
    assert int(trainer.step.numpy()) == 5 and int(trainer.consecutive_nonfinite.numpy()) == 0
    # Weights, optimizer slots and its iteration count are untouched.
    for a, b in zip(before[:-3], after[:-3]):
        np.testing.assert_array_equal(a, b)
    # The next step at the halved scale is applied again... once the scale fits.
    scale.scale.assign(2.0 ** 15)
    sums = trainer.train_step.train_loop(trainer.iterator, tf.constant(1))
    assert float(sums["finite_steps"]) == 1.0
    assert any(not np.array_equal(a, b) for a, b in zip(after[:-3], state(trainer)[:-3]))


# -- TPU-shaped steps --------------------------------------------------------------


def _nodes(graph_def):
    """Every node of `graph_def`, top level and in its function library."""
    return list(graph_def.node) + [n for f in graph_def.library.function for n in f.node_def]


def _string_typed(graph_def):
    """Names of the nodes taking or giving a tf.string, by their op's signature or attrs."""
    string = tf.string.as_datatype_enum

    def touches_string(node):
        op_def = op_def_registry.get(node.op)
        args = list(op_def.input_arg) + list(op_def.output_arg) if op_def else []
        return (any(arg.type == string for arg in args)
                or any(a.type == string or string in a.list.type for a in node.attr.values()))

    return [node.name for node in _nodes(graph_def) if touches_string(node)]


def _host_callbacks(graph_def):
    """Names of the nodes (top level and in the function library) calling back into Python."""
    return [node.name for node in _nodes(graph_def) if node.op in HOST_CALLBACK_OPS]


def test_the_host_checks_catch_what_a_tpu_step_cannot_hold():
    """The checks below can fail: strings, a Python callback and a dynamic length."""
    tokenize = tf.function(lambda text: tf.strings.split(text)).get_concrete_function(
        tf.TensorSpec([None], tf.string))
    assert _string_typed(tokenize.graph.as_graph_def())
    # A string made and consumed inside: no attr says so, the ops' signatures do.
    roundtrip = tf.function(lambda x: tf.strings.to_number(tf.strings.as_string(x)))
    graph = roundtrip.get_concrete_function(tf.TensorSpec([], tf.float32)).graph
    assert _string_typed(graph.as_graph_def())
    callback = tf.function(lambda x: tf.py_function(np.square, [x], tf.float32))
    graph = callback.get_concrete_function(tf.TensorSpec([2], tf.float32)).graph
    assert _host_callbacks(graph.as_graph_def())
    assert fixed_shapes.unfixed_shapes(({"token_ids": tf.TensorSpec([4, None], tf.int32)}, {})) == {
        "token_ids": tf.TensorShape([4, None])}


def test_a_tpu_run_with_dynamic_padding_is_refused_in_one_line():
    """Dynamic padding (the fine-tuning default) gives each batch its own length."""
    name, values = _experiment_values("classifier", "")
    values["data"]["dynamic_padding"] = True
    task_class = tasks.task_class(name)
    task = task_class(config_lib.from_dict(task_class.config_class, values))
    task.resolve()
    task.validate()
    spec = task.train_dataset(None, 4).element_spec
    with pytest.raises(ValueError) as refused:
        fixed_shapes.check_fixed_shapes(spec, task.fixed_shape_settings())
    message = str(refused.value)
    assert "\n" not in message
    assert "token_ids [4, None]" in message and "--set data.dynamic_padding=false" in message


@pytest.mark.slow
@pytest.mark.parametrize("kind", KIND_CASES)
def test_the_train_step_has_what_a_tpu_compiles(runs, kind):
    trainer, _, _ = runs.get(kind, jit_compile=False)
    spec = trainer.iterator.element_spec
    fixed_shapes.check_fixed_shapes(spec, trainer.task.fixed_shape_settings())  # passes
    assert trainer.task.fixed_shape_settings() == {}
    assert trainer.train_step.local_replicas == 1
    loop = trainer.train_step.train_loop.get_concrete_function(trainer.iterator, tf.constant(2))
    graph_def = loop.graph.as_graph_def()
    assert any(node.op == "IteratorGetNext" for node in _nodes(graph_def))  # the batches enter here
    assert _string_typed(graph_def) == [] and _host_callbacks(graph_def) == []

    # The whole replica step (forward, backward, clipping, the optimizer's
    # update, the loss scale), as TPUStrategy compiles it.
    strategy = trainer.strategy
    step = tf.function(lambda batch: strategy.run(trainer.train_step._replica_train_step,
                                                  args=(batch,)), jit_compile=True)
    batch = tf.nest.map_structure(lambda s: tf.zeros(s.shape, s.dtype), spec)
    hlo = step.experimental_get_compiler_ir(batch)(stage="hlo")
    assert "ENTRY" in hlo and "<=" not in hlo  # no bounded-dynamic dimension either
