"""What a TPU needs of the training batches: one shape for every step.

`TPUStrategy` compiles the train step once, for the shapes of its first
batch; a batch of another shape would compile again on every change (or fail
inside a compiled loop). The trainer checks the input pipeline's element spec
before the first step, so a run that cannot keep its shapes fixed says so in
one line instead of failing deep inside the TPU compiler.
"""

from collections.abc import Mapping
from typing import Any

import tensorflow as tf


def unfixed_shapes(batch_spec) -> dict[str, tf.TensorShape]:
    """`{key: shape}` of the tensors in a batch's `(inputs, labels)` specs that vary.

    Args:
      batch_spec: the `element_spec` of a training dataset or iterator: a tuple
        of dicts of `tf.TensorSpec` (inputs, labels).
    """
    return {key: spec.shape for part in batch_spec for key, spec in part.items()
            if not spec.shape.is_fully_defined()}


def check_fixed_shapes(batch_spec, fixed_shape_settings: Mapping[str, Any]) -> None:
    """Raises ValueError naming each varying input and the settings that would fix it.

    Args:
      batch_spec: the training batches' `element_spec` (see `unfixed_shapes`).
      fixed_shape_settings: `{config key: value}` that give the task fixed shapes
        (`Task.fixed_shape_settings`).
    """
    varying = unfixed_shapes(batch_spec)
    if not varying:
        return
    shapes = ", ".join(f"{key} {shape.as_list()}" for key, shape in sorted(varying.items()))
    fix = " ".join(f"--set {key}={str(value).lower()}"
                   for key, value in fixed_shape_settings.items())
    raise ValueError(f"a TPU compiles the train step for one input shape, but these training "
                     f"inputs vary from batch to batch (None = varies): {shapes}; "
                     + (f"give {fix}" if fix else "the task's input pipeline must fix them"))
