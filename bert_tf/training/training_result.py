"""What a `Trainer.train` call returns, and the fingerprint of the weights it ended with."""

import dataclasses
import hashlib

import numpy as np


@dataclasses.dataclass
class TrainingResult:
    """How a `Trainer.train` call ended."""

    step: int
    train_metrics: dict
    eval_metrics: dict
    # SHA-256 of the trainable weights: equal on every worker of a run.
    weights_fingerprint: str = ""
    stopped_by_signal: bool = False
    # The run had reached train_steps before this call: nothing was trained.
    already_complete: bool = False


def weights_fingerprint(variables) -> str:
    """SHA-256 over the bytes of `variables`, in order.

    Args:
      variables: `tf.Variable`s (or anything with `numpy()`), e.g. a model's trainable ones.
    """
    digest = hashlib.sha256()
    for variable in variables:
        digest.update(np.ascontiguousarray(variable.numpy()).tobytes())
    return digest.hexdigest()
