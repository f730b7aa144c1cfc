"""Pretraining model: encoder + masked LM head (+ next-sentence head)."""

import keras

from bert_tf.layers.masked_lm_head import MaskedLMHead
from bert_tf.layers.next_sentence_head import NextSentenceHead
from bert_tf.models.bert_encoder import BertEncoder
from bert_tf.models.task_model import TaskModel, encoder_inputs, pooled_at


@keras.saving.register_keras_serializable(package="bert_tf")
class BertPretrainer(TaskModel):
    """BERT's pretraining model.

    Inputs: the encoder's `token_ids`, `segment_ids`, `padding_mask` [B, S]
    plus `masked_lm_positions` [B, P]. Outputs: `mlm_logits` [B, P, V]
    (float32, output projection tied to the word embeddings) and, with
    `use_nsp=True`, `nsp_logits` [B, 2].

    Packed rows (`packed=True`, several sequences per row, numbered in
    `padding_mask`; see `BertEncoder`) add the input
    `cls_positions` [B, K], the [CLS] position of each of a row's
    K sequence slots, and `nsp_logits` becomes [B, K, 2]: the pooler and
    the NSP head run on each sequence's own [CLS]. The weights are the same
    either way, so a checkpoint serves both; `get_config` leaves `packed`
    out, so a saved model takes ordinary rows.

    Args:
      encoder: the `BertEncoder`; the MLM head shares its word embeddings.
      use_nsp: add the next-sentence head (False: MLM only, as RoBERTa).
      packed: take packed rows (see above).
      **kwargs: `keras.Model` arguments (`name`, `trainable`).

    Examples:
        Masked-LM logits at two positions of a row, and the NSP logits:

        >>> import numpy as np
        >>> from bert_tf.models import BertEncoder, BertPretrainer
        >>> encoder = BertEncoder(vocab_size=100, hidden_size=16, num_layers=2,
        ...                       num_heads=2, intermediate_size=32)
        >>> pretrainer = BertPretrainer(encoder)
        >>> inputs = {"token_ids": np.array([[2, 7, 9, 3, 0]], "int32"),  # [CLS] a b [SEP] pad
        ...           "segment_ids": np.zeros((1, 5), "int32"),
        ...           "padding_mask": np.array([[1, 1, 1, 1, 0]], "int32")}
        >>> positions = np.array([[1, 2]], "int32")  # [B, P]: the masked tokens
        >>> outputs = pretrainer({**inputs, "masked_lm_positions": positions})
        >>> tuple(outputs["mlm_logits"].shape), tuple(outputs["nsp_logits"].shape)
        ((1, 2, 100), (1, 2))
    """

    def __init__(self, encoder: BertEncoder, use_nsp: bool = True, packed: bool = False,
                 **kwargs):
        config = encoder.encoder_config
        inputs = encoder_inputs()
        inputs["masked_lm_positions"] = keras.Input(
            shape=(None,), dtype="int32", name="masked_lm_positions")
        if packed and use_nsp:
            inputs["cls_positions"] = keras.Input(shape=(None,), dtype="int32",
                                                  name="cls_positions")
        encoded = encoder({k: inputs[k] for k in ("token_ids", "segment_ids", "padding_mask")})

        mlm_head = MaskedLMHead(
            encoder.word_embeddings, hidden_act=config.hidden_act,
            layer_norm_epsilon=config.layer_norm_epsilon,
            initializer_range=config.initializer_range,
            dtype=encoder.dtype_policy, name="masked_lm")
        outputs = {"mlm_logits": mlm_head(encoded["sequence_output"],
                                          inputs["masked_lm_positions"])}
        nsp_head = None
        if use_nsp:
            nsp_head = NextSentenceHead(
                initializer_range=config.initializer_range,
                dtype=encoder.dtype_policy, name="next_sentence")
            pooled = (pooled_at(encoder, encoded, inputs["cls_positions"]) if packed
                      else encoded["pooled_output"])  # [B, K, D] or [B, D]
            outputs["nsp_logits"] = nsp_head(pooled)

        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.encoder = encoder
        self.use_nsp = use_nsp
        self.packed = packed
        self.masked_lm_head = mlm_head
        self.next_sentence_head = nsp_head

    def get_config(self):
        # `packed` is the training input format, not the architecture: a saved
        # or exported pretrainer takes ordinary rows.
        return self._task_config(use_nsp=self.use_nsp)
