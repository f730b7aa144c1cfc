"""The trainer's and the runtime's sections of an experiment config."""

import dataclasses

from bert_tf.training.strategy_names import STRATEGIES

INPUT_DISTRIBUTIONS = ("per_worker", "global")
# "auto": the fastest one the hardware computes natively (`bert_tf.training.precision`).
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16", "auto")


@dataclasses.dataclass
class TrainerConfig:
    """Length of the run, loop granularity, checkpoints, evaluation and faults.

    Step counts are global steps (one optimizer update on `global_batch_size`
    examples). `checkpoint_every`, `eval_every` and the profiler range are
    honoured at loop boundaries, which the trainer places on every multiple
    of them, so they need not be multiples of `steps_per_loop`.
    """

    train_steps: int = 1_000_000
    # > 0: train for this many passes over the task's training examples
    # instead (fine-tuning); the trainer sets `train_steps` from it and
    # records the result in params.yaml.
    train_epochs: float = 0.0
    global_batch_size: int = 256
    # Steps run inside one tf.function call (what TPUs need); summaries and
    # the console are updated once per loop.
    steps_per_loop: int = 1000
    # Every evaluation step is a checkpoint step too (a failed evaluation loses nothing).
    checkpoint_every: int = 10000
    max_to_keep: int = 5
    # 0: evaluate only at the end of the run.
    eval_every: int = 10000
    eval_steps: int = 100
    # 0: the global batch size.
    eval_batch_size: int = 0
    # Micro-batches per update; the global batch is split into this many.
    gradient_accumulation_steps: int = 1
    # Consecutive non-finite steps (skipped) before the run rolls back to its
    # last checkpoint and stops.
    max_consecutive_nonfinite: int = 5
    # [first, last] global steps to trace with the TensorFlow profiler; [] for none.
    profile_steps: list[int] = dataclasses.field(default_factory=list)
    # "per_worker": each worker runs its own input pipeline on its shard of
    # the corpus (scales with workers). "global": every worker runs the
    # single-process pipeline and keeps its share of each global batch, so
    # the batches do not depend on the number of workers (costs host CPU).
    input_distribution: str = "per_worker"

    def __post_init__(self):
        for name in ("train_steps", "global_batch_size", "steps_per_loop", "checkpoint_every",
                     "eval_steps", "gradient_accumulation_steps", "max_consecutive_nonfinite"):
            if getattr(self, name) < 1:
                raise ValueError(f"trainer.{name} must be >= 1, got {getattr(self, name)}")
        if self.max_to_keep < 2:
            raise ValueError(f"trainer.max_to_keep must be >= 2 (a good checkpoint must survive "
                             f"a crash while writing the next one), got {self.max_to_keep}")
        if self.train_epochs < 0:
            raise ValueError(f"trainer.train_epochs must be >= 0, got {self.train_epochs}")
        if self.eval_every < 0 or self.eval_batch_size < 0:
            raise ValueError("trainer.eval_every and trainer.eval_batch_size must be >= 0")
        if self.global_batch_size % self.gradient_accumulation_steps:
            raise ValueError(
                f"trainer.global_batch_size ({self.global_batch_size}) must be divisible by "
                f"trainer.gradient_accumulation_steps ({self.gradient_accumulation_steps})")
        if self.input_distribution not in INPUT_DISTRIBUTIONS:
            raise ValueError(f"trainer.input_distribution must be one of {INPUT_DISTRIBUTIONS}, "
                             f"got {self.input_distribution!r}")
        if self.profile_steps and (len(self.profile_steps) != 2
                                   or not 0 <= self.profile_steps[0] < self.profile_steps[1]):
            raise ValueError(f"trainer.profile_steps must be [first, last] with first < last, "
                             f"got {self.profile_steps}")


@dataclasses.dataclass
class RuntimeConfig:
    """Where and how the run executes (the CLI's --strategy/--tpu override these)."""

    strategy: str = "auto"
    tpu: str = ""
    # >1 splits the CPU into this many logical devices (for `mirrored` on a
    # CPU-only machine, as the tests do).
    logical_cpu_devices: int = 0
    mixed_precision: str = "float32"
    # None: XLA on for TPUs and GPUs, off on CPUs (slower there).
    jit_compile: bool | None = None
    # Deterministic TensorFlow ops (bit-exact resume on CPU; slower on GPU).
    deterministic: bool = False
    # Seeds weight initialisation and dropout (the data has its own seed).
    seed: int = 0
    # multi_worker: a worker whose heartbeats stop this long (killed, its machine lost)
    # stops every other worker within it plus 3 s, with exit code 75 (TensorFlow's
    # default: 10 s; smaller takes a stalled, overloaded worker for lost).
    worker_timeout_seconds: int = 10

    def __post_init__(self):
        if self.strategy not in STRATEGIES:
            raise ValueError(f"runtime.strategy must be one of {STRATEGIES}, got {self.strategy!r}")
        if self.mixed_precision not in PRECISIONS:
            raise ValueError(f"runtime.mixed_precision must be one of {PRECISIONS}, "
                             f"got {self.mixed_precision!r}")
        if self.worker_timeout_seconds < 1:
            raise ValueError(f"runtime.worker_timeout_seconds must be >= 1 (TensorFlow checks "
                             f"heartbeats once a second), got {self.worker_timeout_seconds}")
        if self.logical_cpu_devices < 0:
            raise ValueError(f"runtime.logical_cpu_devices must be >= 0, "
                             f"got {self.logical_cpu_devices}")
