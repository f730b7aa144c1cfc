"""Optimizers and learning-rate schedules for BERT training.

AdamW as BERT trains with it: decoupled weight decay on every weight except
LayerNorm parameters and biases (Keras names them `gamma`, `beta`, `bias`,
`output_bias`), and LAMB (Keras' own `Lamb`) for large batches. The learning
rate warms up linearly from 0, then decays polynomially (power 1: linearly)
to `end_learning_rate` at `decay_steps`, as in google-research/bert.

The optimizers returned here expect gradients that the train step has
already summed across replicas: it needs the summed gradients anyway, for
the global-norm clipping and the finite check, so the optimizer must not sum
them a second time (see `train_step.py`).
"""

import dataclasses

import keras

# Substrings of Keras variable names that get no weight decay (BERT's
# exclusions "LayerNorm", "layer_norm" and "bias", in Keras 3 names).
NO_WEIGHT_DECAY = ("gamma", "beta", "bias")

OPTIMIZERS = ("adamw", "lamb")
DECAYS = ("linear", "polynomial", "constant")


@dataclasses.dataclass
class OptimizerConfig:
    """Optimizer and learning-rate schedule (defaults: BERT pretraining)."""

    name: str = "adamw"
    learning_rate: float = 1e-4
    beta_1: float = 0.9
    beta_2: float = 0.999
    epsilon: float = 1e-6
    weight_decay: float = 0.01
    warmup_steps: int = 10000
    # A fraction of the run's steps to warm up over instead (fine-tuning's
    # "10 % warmup"); 0 uses `warmup_steps`. Set one of the two, not both.
    warmup_proportion: float = 0.0
    decay: str = "linear"
    decay_power: float = 1.0
    # None: decay over the run's `trainer.train_steps`.
    decay_steps: int | None = None
    end_learning_rate: float = 0.0
    # Clip the summed gradients to this global norm; 0 disables clipping.
    clip_norm: float = 1.0

    def __post_init__(self):
        if self.name not in OPTIMIZERS:
            raise ValueError(f"optimizer.name must be one of {OPTIMIZERS}, got {self.name!r}")
        if self.decay not in DECAYS:
            raise ValueError(f"optimizer.decay must be one of {DECAYS}, got {self.decay!r}")
        if self.learning_rate <= 0:
            raise ValueError(f"optimizer.learning_rate must be > 0, got {self.learning_rate}")
        if self.warmup_steps < 0:
            raise ValueError(f"optimizer.warmup_steps must be >= 0, got {self.warmup_steps}")
        if not 0.0 <= self.warmup_proportion < 1.0:
            raise ValueError(f"optimizer.warmup_proportion must be in [0, 1), "
                             f"got {self.warmup_proportion}")
        if self.warmup_proportion and self.warmup_steps:
            raise ValueError(
                f"optimizer.warmup_steps ({self.warmup_steps}) and optimizer.warmup_proportion "
                f"({self.warmup_proportion}) are both set; set the other to 0")
        if self.clip_norm < 0:
            raise ValueError(f"optimizer.clip_norm must be >= 0, got {self.clip_norm}")


@keras.saving.register_keras_serializable(package="bert_tf")
class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup to `peak`, then `(peak - end) * (1 - step / decay_steps)^power + end`.

    Warmup gives `peak * (step + 1) / warmup_steps` (so the first update is
    not zero). As in google-research/bert's `optimization.py`, the decay
    counts from step 0 (warmup included) and the warmup rate replaces it
    during the first `warmup_steps`; after `decay_steps` the rate stays at `end`. `power=0`
    keeps the peak rate after warmup (a constant schedule).
    """

    def __init__(self, peak_learning_rate, warmup_steps, decay_steps,
                 end_learning_rate=0.0, power=1.0):
        self.peak_learning_rate = float(peak_learning_rate)
        self.warmup_steps = int(warmup_steps)
        self.decay_steps = int(decay_steps)
        self.end_learning_rate = float(end_learning_rate)
        self.power = float(power)

    def __call__(self, step):
        step = keras.ops.cast(step, "float32")
        peak = self.peak_learning_rate
        warmup = float(max(self.warmup_steps, 1))
        warm = peak * keras.ops.minimum(step + 1.0, warmup) / warmup
        progress = keras.ops.clip(step / float(max(self.decay_steps, 1)), 0.0, 1.0)
        decayed = (peak - self.end_learning_rate) * (1.0 - progress) ** self.power
        decayed = decayed + self.end_learning_rate
        return keras.ops.where(step < self.warmup_steps, warm, decayed)

    def get_config(self):
        return {
            "peak_learning_rate": self.peak_learning_rate,
            "warmup_steps": self.warmup_steps,
            "decay_steps": self.decay_steps,
            "end_learning_rate": self.end_learning_rate,
            "power": self.power,
        }


def learning_rate_schedule(config, train_steps):
    """The `WarmupPolynomialDecay` an `OptimizerConfig` describes."""
    power = {"linear": 1.0, "polynomial": config.decay_power, "constant": 0.0}[config.decay]
    warmup_steps = config.warmup_steps
    if config.warmup_proportion:
        warmup_steps = int(round(config.warmup_proportion * train_steps))
    return WarmupPolynomialDecay(
        config.learning_rate, warmup_steps, config.decay_steps or train_steps,
        end_learning_rate=config.end_learning_rate, power=power)


def _summed_gradients_variant(optimizer_class):
    """A subclass of a Keras 3 optimizer that takes already-summed gradients.

    Keras' TensorFlow optimizer sums gradients across replicas itself when
    applied in a replica context (`_all_reduce_sum_gradients`); our train step
    sums them first, so that sum must be the identity here.
    """

    class SummedGradients(optimizer_class):
        def _all_reduce_sum_gradients(self, grads_and_vars):
            return list(grads_and_vars)

    SummedGradients.__name__ = optimizer_class.__name__
    SummedGradients.__qualname__ = optimizer_class.__qualname__
    return SummedGradients


_ADAMW = _summed_gradients_variant(keras.optimizers.AdamW)
_LAMB = _summed_gradients_variant(keras.optimizers.Lamb)


def build_optimizer(config, train_steps):
    """A Keras 3 optimizer for `config`, with its schedule over `train_steps`.

    Build it under the strategy's scope. Weight decay skips LayerNorm and
    bias variables (`NO_WEIGHT_DECAY`). For LAMB, Keras applies the decay
    decoupled from the trust ratio, as AdamW does.
    """
    schedule = learning_rate_schedule(config, train_steps)
    # Keras' AdamW insists on a float weight decay; Lamb takes None for none.
    weight_decay = config.weight_decay if config.name == "adamw" else config.weight_decay or None
    optimizer_class = _ADAMW if config.name == "adamw" else _LAMB
    optimizer = optimizer_class(
        learning_rate=schedule, beta_1=config.beta_1, beta_2=config.beta_2,
        epsilon=config.epsilon, weight_decay=weight_decay)
    if config.weight_decay:
        optimizer.exclude_from_weight_decay(var_names=list(NO_WEIGHT_DECAY))
    return optimizer
