"""Dynamic loss scaling for `mixed_float16`, done once in the shared train step.

float16 gradients underflow unless the loss is multiplied by a large factor
before differentiation. The scale starts high, halves whenever the summed
gradients are not finite (that step is skipped) and doubles after
`growth_interval` finite steps in a row. bfloat16 has float32's exponent
range and needs none of this: `LossScale(enabled=False)` is the identity.
"""

import tensorflow as tf


class LossScale(tf.Module):
    """The loss scale as variables, so it is checkpointed and restored.

    Create it under the strategy's scope. `scale_loss`, `unscale` and
    `update` run inside the replica step; every replica sees the same summed
    gradients, so every replica makes the same update and the mirrored
    variables stay equal.
    """

    def __init__(self, enabled, initial_scale=2.0 ** 15, growth_interval=2000,
                 name="loss_scale"):
        super().__init__(name=name)
        self.enabled = enabled
        self.initial_scale = initial_scale
        self.growth_interval = growth_interval
        aggregation = tf.VariableAggregation.ONLY_FIRST_REPLICA
        self.scale = tf.Variable(initial_scale if enabled else 1.0, trainable=False,
                                 dtype=tf.float32, aggregation=aggregation, name="scale")
        self.good_steps = tf.Variable(0, trainable=False, dtype=tf.int64,
                                      aggregation=aggregation, name="good_steps")

    def reset(self):
        """Starts the scale over, for a run that scaled no loss before this resume.

        A checkpoint of a float32 or bf16 run holds the disabled scale (1.0); a
        float16 run resumed from it would start at the minimum scale and underflow.
        """
        self.scale.assign(self.initial_scale if self.enabled else 1.0)
        self.good_steps.assign(0)

    def scale_loss(self, loss):
        return loss * self.scale if self.enabled else loss

    def unscale(self, gradients):
        if not self.enabled:
            return gradients
        inverse = 1.0 / self.scale
        return [g * tf.cast(inverse, g.dtype) for g in gradients]

    def update(self, finite):
        """Halves the scale after a non-finite step, doubles it after a good run."""
        if not self.enabled:
            return
        grow = tf.logical_and(finite, self.good_steps + 1 >= self.growth_interval)
        new_scale = tf.where(finite, tf.where(grow, self.scale * 2.0, self.scale),
                             tf.maximum(self.scale * 0.5, 1.0))
        self.scale.assign(new_scale)
        self.good_steps.assign(tf.where(tf.logical_and(finite, tf.logical_not(grow)),
                                        self.good_steps + 1, tf.zeros_like(self.good_steps)))

    @property
    def at_minimum(self):
        """True when the scale cannot shrink further (a non-finite step is then a real failure)."""
        return tf.logical_or(tf.logical_not(self.enabled), self.scale <= 1.0)
