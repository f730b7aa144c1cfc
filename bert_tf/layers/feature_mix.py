"""Which of a frozen encoder's hidden states feed a feature-based model (paper Table 7)."""

import keras
from keras import ops

# name -> (hidden states used, how they combine); states are indexed over
# [embedding output, layer 1, ..., layer L], so -1 is the last layer.
_EVERY_LAYER = slice(1, None)  # the Transformer layers, not the embedding output
MIXES = {
    "embeddings": ((0,), "single"),
    "second_to_last": ((-2,), "single"),
    "last": ((-1,), "single"),
    "sum_last_four": ((-4, -3, -2, -1), "weighted_sum"),
    "concat_last_four": ((-4, -3, -2, -1), "concat"),
    # The paper's "weighted sum all 12 layers": BERT-base's Transformer layers.
    "sum_all": (_EVERY_LAYER, "weighted_sum"),
}


def layers_needed(mix: str) -> int:
    """The fewest Transformer layers an encoder needs for `mix` (e.g. 4 for the last four).

    Args:
      mix: a key of `MIXES`.
    """
    indices, _ = MIXES[mix]
    if indices == _EVERY_LAYER:
        return 1
    # States are [embeddings, layer 1, ..., layer L]: index -k needs k layers.
    return max((-i for i in indices if i < 0), default=0)


@keras.saving.register_keras_serializable(package="bert_tf")
class FeatureMix(keras.layers.Layer):
    """Combines hidden states [B, S, D] each into the features [B, S, F].

    "weighted_sum" learns one scalar per state, softmax-normalised (the
    scalar mix of ELMo; it starts as the plain mean), "concat" joins them
    (F = 4D for the last four), "single" passes one state through.

    Args:
      mix: a key of `MIXES`.
      **kwargs: `keras.layers.Layer` arguments.
    """

    def __init__(self, mix: str, **kwargs):
        super().__init__(**kwargs)
        if mix not in MIXES:
            raise ValueError(f"unknown feature mix {mix!r}; expected one of {sorted(MIXES)}")
        self.mix = mix
        self.indices, self.combine = MIXES[mix]

    def select(self, states):
        """The states this mix uses, from [embeddings, layer 1, ..., layer L]."""
        if self.indices == _EVERY_LAYER:
            return list(states[_EVERY_LAYER])
        return [states[i] for i in self.indices]

    def build(self, input_shape):
        if self.combine == "weighted_sum":
            count = (len(input_shape) - 1 if self.indices == _EVERY_LAYER
                     else len(self.indices))
            self.state_logits = self.add_weight(name="state_logits", shape=(count,),
                                                initializer="zeros")

    def call(self, states):
        """`states`: the list [embedding output, layer 1, ..., layer L], each [B, S, D]."""
        chosen = self.select(states)
        if self.combine == "single":
            return chosen[0]
        if self.combine == "concat":
            return ops.concatenate(chosen, axis=-1)  # [B, S, len(chosen) * D]
        weights = ops.softmax(self.state_logits)  # [N]
        stacked = ops.stack(chosen, axis=0)  # [N, B, S, D]
        return ops.sum(stacked * ops.cast(weights, stacked.dtype)[:, None, None, None], axis=0)

    def get_config(self):
        return {**super().get_config(), "mix": self.mix}
