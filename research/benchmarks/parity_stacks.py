"""The two training stacks the parity harness compares, built from one set of weights.

Ours: `BertPretrainer` trained by the trainer's own `TrainStep` with the
pretraining task's losses and `optimizers.build_optimizer` (Keras 3).
Model Garden's: `BertPretrainerV2` built by its `MaskedLMTask` (an NSP
`ClassificationHead` named `next_sentence`), trained by that task's own
`train_step` (its `build_losses`) with the optimizer from its
`OptimizerFactory` (`adamw`, i.e. `legacy_adamw.AdamWeightDecay`, tf_keras).
Its encoder is ours exported with `checkpoints.model_garden.to_garden_encoder`;
the MLM and NSP head weights are copied here.

Both stacks expose the same small protocol (`Stack`): `train(batches)` runs
one step per batch and returns the per-step losses measured on the forward
pass of that step, `arrays()` returns every weight in our canonical
(google-research/bert) names and layout, and `checkpoint` saves the state
needed to resume.

Deliberately wrong variants of ours (`VARIANTS`) are the harness's negative
controls: they must be reported as diverging.
"""

import abc
import dataclasses

import keras
import numpy as np
import tensorflow as tf

from bert_tf.checkpoints import model_garden, weight_map
from bert_tf.data.pretraining import to_model_inputs
from bert_tf.layers.activations import TANH_GELU_NAMES
from bert_tf.models.bert_encoder import BertEncoder
from bert_tf.models.bert_pretrainer import BertPretrainer
from bert_tf.tasks.pretraining import PretrainingExperiment, PretrainingModelConfig, PretrainingTask
from bert_tf.training.loss_scale import LossScale
from bert_tf.training.optimizers import OptimizerConfig, build_optimizer, learning_rate_schedule
from bert_tf.training.train_step import TrainStep

# Our variants: the correct stack and two known-wrong ones.
VARIANTS = {
    "ours": "our trainer as shipped",
    "ln_decay": "weight decay also on LayerNorm gamma/beta (only biases excluded)",
    "mlm_token_mean": "MLM loss summed over masked positions but divided by every real "
                      "token of the batch instead of the masked ones",
}

# Model Garden's weight-decay exclusions in its BERT pretraining configs.
GARDEN_NO_DECAY = ["LayerNorm", "layer_norm", "bias"]

# Our canonical head weight name -> Model Garden variable (without model scope and ":0").
# The NSP path: ours pools in the encoder (tanh dense on [CLS]) and applies a
# Dense(2); Garden's ClassificationHead does both itself, so our encoder's
# pooler maps to its `pooler_dense` (Garden's encoder pooler stays unused).
_GARDEN_HEADS = {
    "cls/predictions/transform/dense/kernel": "cls/predictions/transform/dense/kernel",
    "cls/predictions/transform/dense/bias": "cls/predictions/transform/dense/bias",
    "cls/predictions/transform/LayerNorm/gamma": "cls/predictions/transform/LayerNorm/gamma",
    "cls/predictions/transform/LayerNorm/beta": "cls/predictions/transform/LayerNorm/beta",
    "cls/predictions/output_bias": "cls/predictions/output_bias/bias",
    "bert/pooler/dense/kernel": "next_sentence/pooler_dense/kernel",
    "bert/pooler/dense/bias": "next_sentence/pooler_dense/bias",
    "cls/seq_relationship/output_weights": "next_sentence/logits/kernel",
    "cls/seq_relationship/output_bias": "next_sentence/logits/bias",
}


@dataclasses.dataclass(frozen=True)
class StackConfig:
    """What both stacks share: shapes, dropout and the optimizer's hyperparameters."""

    encoder: object  # bert_tf EncoderConfig (dropout included)
    learning_rate: float
    warmup_steps: int
    decay_steps: int
    weight_decay: float = 0.01
    epsilon: float = 1e-6
    clip_norm: float = 1.0


class Stack(abc.ABC):
    """One framework's model + optimizer + train step, fed numpy batches."""

    name: str

    @abc.abstractmethod
    def train(self, batches):
        """Runs one step per batch; returns `{"loss", "mlm_loss", "nsp_loss"}` lists."""

    @abc.abstractmethod
    def arrays(self):
        """Every trained weight, `{canonical name: array in our layout}`."""

    @property
    @abc.abstractmethod
    def checkpoint(self):
        """A `tf.train.Checkpoint` of the model and optimizer state."""


# --- learning rate -----------------------------------------------------------


def our_optimizer_config(config):
    """Our `OptimizerConfig` for a `StackConfig`: AdamW, linear warmup then linear decay."""
    return OptimizerConfig(
        learning_rate=config.learning_rate, weight_decay=config.weight_decay,
        epsilon=config.epsilon, warmup_steps=config.warmup_steps, decay="linear",
        decay_steps=config.decay_steps, clip_norm=config.clip_norm)


def our_schedule(config):
    """Our learning-rate schedule (`WarmupPolynomialDecay`) for a `StackConfig`."""
    return learning_rate_schedule(our_optimizer_config(config), config.decay_steps)


def garden_schedule(config):
    """Model Garden's own schedule for the same settings (linear warmup + polynomial, power 1)."""
    return _garden_factory(config).build_learning_rate()


def google_bert_learning_rate(config, step):
    """google-research/bert `optimization.py`'s rate at 0-based `step` (numpy)."""
    decayed = config.learning_rate * (1.0 - min(step, config.decay_steps) / config.decay_steps)
    if step < config.warmup_steps:
        return config.learning_rate * step / config.warmup_steps
    return decayed


def _garden_factory(config):
    from official.modeling.optimization import optimizer_factory
    from official.modeling.optimization.configs import optimization_config

    return optimizer_factory.OptimizerFactory(optimization_config.OptimizationConfig({
        "optimizer": {"type": "adamw", "adamw": {
            "weight_decay_rate": config.weight_decay, "beta_1": 0.9, "beta_2": 0.999,
            "epsilon": config.epsilon, "exclude_from_weight_decay": GARDEN_NO_DECAY,
            "gradient_clip_norm": config.clip_norm}},
        "learning_rate": {"type": "polynomial", "polynomial": {
            "initial_learning_rate": config.learning_rate, "decay_steps": config.decay_steps,
            "end_learning_rate": 0.0, "power": 1.0}},
        "warmup": {"type": "linear", "linear": {"warmup_steps": config.warmup_steps,
                                                "warmup_learning_rate": 0.0}},
    }))


def _tf_keras_schedule(schedule):
    """Our Keras 3 schedule as a tf_keras `LearningRateSchedule` (same values, same steps)."""
    import tf_keras

    class OurSchedule(tf_keras.optimizers.schedules.LearningRateSchedule):
        def __call__(self, step):
            return tf.cast(schedule(step), tf.float32)

        def get_config(self):
            return schedule.get_config()

    return OurSchedule()


# --- ours ----------------------------------------------------------------------


class TokenMeanTask(PretrainingTask):
    """Negative control: the MLM loss divided by the batch's real tokens, not its masked ones."""

    def compute_loss(self, labels, outputs, inputs, denominators):
        sums = self.metric_sums(labels, outputs, inputs)
        loss = sums["mlm_loss_sum"] / tf.maximum(sums["tokens"], 1.0)
        loss += sums["nsp_loss_sum"] / tf.maximum(denominators["nsp"], 1.0)
        return loss, sums


def build_our_model(encoder_config, seed):
    """Our `BertPretrainer` (MLM + NSP), initialised from `seed`."""
    keras.utils.set_random_seed(seed)
    return BertPretrainer(BertEncoder.from_encoder_config(encoder_config))


class OurStack(Stack):
    """Our model, `TrainStep`, task losses and AdamW; `variant` picks a negative control."""

    def __init__(self, config, model, variant="ours"):
        if variant not in VARIANTS:
            raise ValueError(f"unknown variant {variant!r}; expected one of {list(VARIANTS)}")
        self.name = variant
        self.model = model
        optimizer = build_optimizer(our_optimizer_config(config), config.decay_steps)
        if variant == "ln_decay":
            # The same optimizer class and schedule, excluding only biases.
            optimizer = type(optimizer)(
                learning_rate=our_schedule(config), beta_1=0.9, beta_2=0.999,
                epsilon=config.epsilon, weight_decay=config.weight_decay)
            optimizer.exclude_from_weight_decay(var_names=["bias"])
        optimizer.build(model.trainable_variables)
        self.optimizer = optimizer
        experiment = PretrainingExperiment(
            model=PretrainingModelConfig(encoder=model.encoder.encoder_config))
        task_class = TokenMeanTask if variant == "mlm_token_mean" else PretrainingTask
        task = task_class(experiment)
        self._task = task
        counter = dict(dtype=tf.int64, trainable=False)
        self.step = tf.Variable(0, **counter)
        self._train_step = TrainStep(
            tf.distribute.get_strategy(), task, model, optimizer, LossScale(enabled=False),
            clip_norm=config.clip_norm, accumulation_steps=1, jit_compile=False,
            step=self.step, consecutive_nonfinite=tf.Variable(0, **counter))
        self._checkpoint = tf.train.Checkpoint(
            model_variables={v.path.replace("/", "."): v for v in model.variables},
            optimizer=optimizer, step=self.step)

    def train(self, batches):
        dataset = tf.data.Dataset.from_tensor_slices(batches).map(to_model_inputs)
        iterator = iter(dataset)
        one = tf.constant(1)
        losses = {"loss": [], "mlm_loss": [], "nsp_loss": []}
        for _ in range(len(batches["input_ids"])):
            sums = self._train_step.train_loop(iterator, one)
            metrics = self._task.metrics({k: v.numpy() for k, v in sums.items()})
            # The total the variant actually optimised, not the re-derived one.
            losses["loss"].append(float(sums["loss"]))
            losses["mlm_loss"].append(float(sums["mlm_loss_sum"]) / self._mlm_denominator(sums))
            losses["nsp_loss"].append(metrics["nsp_loss"])
        return losses

    def _mlm_denominator(self, sums):
        # The MLM loss as this variant defines it (the token-mean control
        # divides by tokens), so a wrong normalisation shows in this curve.
        if self.name == "mlm_token_mean":
            return max(float(sums["tokens"]), 1.0)
        return max(float(sums["mlm_weight"]), 1.0)

    def arrays(self):
        return {slot.name: slot.variable.numpy() for slot in weight_map.model_slots(self.model)}

    @property
    def checkpoint(self):
        return self._checkpoint


# --- Model Garden --------------------------------------------------------------


def _garden_task(encoder_config, batch):
    """A `MaskedLMTask` whose encoder is `to_garden_encoder(ours)` and NSP head has no dropout."""
    from official.nlp.configs import bert
    from official.nlp.data import pretrain_dataloader
    from official.nlp.tasks import masked_lm

    class ExportedEncoderTask(masked_lm.MaskedLMTask):
        """Garden's own task, with its encoder built by our exporter (its `_build_encoder` hook)."""

        def __init__(self, config, encoder):
            super().__init__(config)
            self._encoder = encoder

        def _build_encoder(self, encoder_cfg):
            return self._encoder

    config = masked_lm.MaskedLMConfig(
        model=bert.PretrainerConfig(
            # google-research/bert and ours apply no dropout between the
            # pooler and the NSP classifier; Garden's default head has 0.1.
            cls_heads=[bert.ClsHeadConfig(inner_dim=encoder_config.hidden_size, num_classes=2,
                                          dropout_rate=0.0, name="next_sentence")],
            mlm_activation=_garden_activation_name(encoder_config),
            mlm_initializer_range=encoder_config.initializer_range),
        train_data=pretrain_dataloader.BertPretrainDataConfig(
            use_next_sentence_label=True, global_batch_size=batch))
    return ExportedEncoderTask, config


def _garden_activation_name(encoder_config):
    # Garden's "gelu" is the tanh approximation (official/modeling/activations/gelu.py).
    if encoder_config.hidden_act not in TANH_GELU_NAMES:
        raise ValueError(
            f"Model Garden's MLM head only has the tanh GELU; encoder hidden_act is "
            f"{encoder_config.hidden_act!r} (use gelu_tanh for parity)")
    return "gelu"


def garden_inputs(batches):
    """Our pipeline's features under Model Garden's input names."""
    renames = {"input_ids": "input_word_ids", "input_mask": "input_mask",
               "segment_ids": "input_type_ids"}
    return {renames.get(k, k): v for k, v in batches.items()}


class GardenStack(Stack):
    """Model Garden's `BertPretrainerV2`, `MaskedLMTask.train_step` and factory optimizer."""

    name = "garden"

    def __init__(self, config, our_model):
        task_class, task_config = _garden_task(config.encoder, batch=1)
        encoder = model_garden.to_garden_encoder(our_model.encoder)
        self.task = task_class(task_config, encoder)
        self.model = self.task.build_model()
        self.encoder = encoder
        # Canonical names of the encoder weights Garden's encoder holds (the
        # pooler is compared through the NSP head instead).
        self._encoder_slots = [s for s in weight_map.encoder_slots(our_model.encoder)
                               if s.name not in _GARDEN_HEADS]
        seq = 8
        ones = tf.ones((1, seq), tf.int32)
        self.model(dict(input_word_ids=ones, input_mask=ones, input_type_ids=0 * ones,
                        masked_lm_positions=tf.zeros((1, 2), tf.int32)))
        self._copy_heads(our_model)
        # The harness compares optimizer and loss semantics, so both stacks
        # follow one learning-rate curve (ours); Garden's own curve differs in
        # warmup (see `garden_schedule` and the report's table).
        self.optimizer = _garden_factory(config).build_optimizer(
            _tf_keras_schedule(our_schedule(config)))
        self.metrics = {m.name: m for m in self.task.build_metrics()}
        self._step = tf.function(self._step_fn)
        self._checkpoint = tf.train.Checkpoint(model=self.model, optimizer=self.optimizer)

    def _variables(self):
        return {v.name.split("/", 1)[1].rsplit(":", 1)[0]: v for v in self.model.weights}

    def _copy_heads(self, our_model):
        variables = self._variables()
        ours = {slot.name: slot.variable for slot in weight_map.model_slots(our_model)}
        for canonical, garden_name in _GARDEN_HEADS.items():
            variables[garden_name].assign(ours[canonical].numpy())

    def _step_fn(self, inputs):
        logs = self.task.train_step(inputs, self.model, self.optimizer,
                                    list(self.metrics.values()))
        return (logs["loss"], self.metrics["lm_example_loss"].result(),
                self.metrics["next_sentence_loss"].result())

    def train(self, batches):
        inputs = garden_inputs(batches)
        losses = {"loss": [], "mlm_loss": [], "nsp_loss": []}
        for i in range(len(batches["input_ids"])):
            loss, mlm, nsp = self._step({k: tf.constant(v[i]) for k, v in inputs.items()})
            for metric in self.metrics.values():
                metric.reset_state()
            losses["loss"].append(float(loss))
            losses["mlm_loss"].append(float(mlm))
            losses["nsp_loss"].append(float(nsp))
        return losses

    def arrays(self):
        arrays = model_garden.garden_arrays(self.encoder, self._encoder_slots)
        variables = self._variables()
        arrays.update({canonical: variables[name].numpy()
                       for canonical, name in _GARDEN_HEADS.items()})
        return arrays

    @property
    def checkpoint(self):
        return self._checkpoint


def build_stacks(config, seed, variants=("ours",), garden=True):
    """`{name: Stack}`: Garden's and one of ours per variant, all from the same initial weights."""
    model = build_our_model(config.encoder, seed)
    initial = [v.numpy() for v in model.weights]
    stacks = {"garden": GardenStack(config, model)} if garden else {}
    for i, variant in enumerate(variants):
        if i:
            model = build_our_model(config.encoder, seed)
            for variable, value in zip(model.weights, initial):
                variable.assign(value)
        stacks[variant] = OurStack(config, model, variant)
    return stacks


def compare_arrays(ours, garden, initial):
    """Per-weight differences after training.

    Returns `{name: {"max_abs": ..., "update_rel": ...}}` where `update_rel` is
    ||(ours - init) - (garden - init)|| / ||ours - init||: how far the two
    stacks' total updates of that weight differ, relative to the update.
    """
    report = {}
    for name, value in ours.items():
        other = garden[name]
        update = value - initial[name]
        diff = np.asarray(value, np.float64) - np.asarray(other, np.float64)
        report[name] = {
            "max_abs": float(np.max(np.abs(diff))),
            "update_rel": float(np.linalg.norm(diff) / max(np.linalg.norm(update), 1e-30)),
        }
    return report
