"""The exported `tf.Module`: a task model's variables, its tokenizer and signatures.

The Keras model is not tracked as an object: Keras 3 variables saved that
way get a second resource handle each, and TF1-style loaders (TF Serving's
C++ loader, `saved_model_cli run`) then restore one handle and read the
other. As Keras's own `ExportArchive` does, the module tracks the plain
`tf.Variable`s the signatures capture.

Signatures (outputs are float32, int32 or string; B batch, C choices, W words),
supplied per task kind by `kinds.SERVING_KINDS`:
  serving_default  raw text in (see `ServingKind.text_inputs`), by task kind:
    classifier        text [B] (+ text_pair [B]) -> logits, probabilities [B, K],
                      label_id [B], label [B] (its name)
    regressor         text [B] (+ text_pair [B]) -> score [B]
    span_labeler      question, context [B] -> answer [B] (text of the context),
                      start_char, end_char [B] (character offsets into the
                      context, end exclusive, -1 for no answer), score [B]
                      (+ no_answer_score [B] for SQuAD v2.0: answer "" when it wins)
    token_classifier  text [B], split on whitespace -> words, labels [B, W]
                      (label of each word's first piece; "" for padding and for
                      words truncated away), word_start_char, word_end_char
                      [B, W] (-1 padding), num_words [B]
    multiple_choice   context [B], choices [B, C] -> logits, probabilities [B, C],
                      choice_id [B]
    encoder/pretrainer  text [B] -> pooled_output [B, D], sequence_output
                      [B, S, D], padding_mask [B, S]
  encode           text [B] -> pooled_output, sequence_output, padding_mask
  serve_token_ids  input_word_ids, input_mask, input_type_ids int32 [B, S]
                   ([B, C, S] for multiple choice), checked (ids in the vocab,
                   types in range, equal shapes) -> the outputs above that need
                   no text: classifier, regressor and multiple choice as above;
                   span_labeler start_logits, end_logits [B, S], start_index,
                   end_index [B] (packed positions, -1 for none), score (+
                   no_answer_score); token_classifier logits [B, S, K],
                   label_ids, labels [B, S]; encoder outputs for encoder kinds.

Tensor legend: S sequence length, K classes/labels, D hidden size.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from bert_tf.checkpoints.task_record import TaskRecord
from bert_tf.export import kinds
from bert_tf.text.segment_packer import SegmentPacker


def build_serving_module(model: Any, tokenizer: Any,
                         record: TaskRecord) -> tuple[tf.Module, dict[str, Any]]:
    """(tf.Module to save, {name: concrete function} signatures).

    Args:
      model: a bert_tf Keras model (encoder or any task model).
      tokenizer: the `BertTokenizer` the model was trained with (its vocab
        becomes an asset of the SavedModel).
      record: the `TaskRecord` of the model; its kind picks the signatures'
        inputs and outputs from `kinds.SERVING_KINDS`.

    Raises:
      ValueError: the record's kind is not registered.
    """
    signatures = ServingFunctions(model, tokenizer, record).signatures()
    module = tf.Module(name="bert_tf_export")
    module.tokenizer = tokenizer
    captured, seen = [], set()
    for function in signatures.values():
        for variable in function.variables:
            if id(variable) not in seen:
                seen.add(id(variable))
                captured.append(variable)
    module.model_variables = captured
    for name, function in signatures.items():
        # Signatures take keyword arguments only; Keras' TFSMLayer calls its
        # endpoint with one positional input, and prefers an attribute of
        # that name: the same function taking a dict.
        setattr(module, name, _dict_input_function(function))
    return module, signatures


def _dict_input_function(function):
    """`function(**inputs)` as a tf.function of one dict argument."""
    specs = {spec.name: spec for spec in tf.nest.flatten(function.structured_input_signature)}
    return tf.function(lambda inputs: function(**inputs), input_signature=[specs])


# Text batches are padded to a multiple of this (see `ServingFunctions`).
SERVING_PAD_MULTIPLE = 8


class ServingFunctions:
    """The signature functions: model, tokenizer and packer in one graph.

    What differs by task kind comes from the record's `kinds.ServingKind`;
    the token-id checks and the `encode` signature are the same for all.

    Args: see `build_serving_module`.
    """

    def __init__(self, model, tokenizer, record):
        self.kind = kinds.serving_kind(record.kind)
        self.record = record
        # Text requests are padded to their longest text (rounded up to 8),
        # not to max_seq_length: a batch of short texts runs short.
        packer = SegmentPacker.from_tokenizer(tokenizer, record.max_seq_length,
                                              pad_to_multiple=SERVING_PAD_MULTIPLE)
        self.context = kinds.ServingContext(model, tokenizer, packer, record)
        config = self.context.encoder.encoder_config
        self._vocab_size = tokenizer.vocab_size
        self._type_vocab_size = config.type_vocab_size
        self._max_positions = config.max_position_embeddings

    # --- signatures -------------------------------------------------------

    def signatures(self):
        """{name: concrete function} for `tf.saved_model.save`."""
        serving = tf.function(self._serve_text,
                              input_signature=self.kind.text_inputs(self.record))
        encode = tf.function(self._encode_text, input_signature=[kinds.text_spec("text")])
        id_shape = self.kind.token_ids_shape(self.record)
        id_specs = [tf.TensorSpec(id_shape, tf.int32, name=name)
                    for name in ("input_word_ids", "input_mask", "input_type_ids")]
        token_ids = tf.function(self._serve_token_ids, input_signature=id_specs)
        return {
            "serving_default": serving.get_concrete_function(),
            "encode": encode.get_concrete_function(),
            "serve_token_ids": token_ids.get_concrete_function(),
        }

    def _serve_text(self, *texts):
        return self.kind.serve_text(self.context, *texts)

    def _encode_text(self, text):
        return kinds.encode_text(self.context, text)

    def _serve_token_ids(self, input_word_ids, input_mask, input_type_ids):
        checks = self._check_token_ids(input_word_ids, input_mask, input_type_ids)
        with tf.control_dependencies(checks):
            features = {"token_ids": tf.identity(input_word_ids),
                        "segment_ids": tf.identity(input_type_ids),
                        "padding_mask": tf.identity(input_mask)}
        return self.kind.serve_features(self.context, features)

    # --- input checks -----------------------------------------------------

    def _check_token_ids(self, word_ids, mask, type_ids):
        """Asserts that fail the request with a message naming the bad input.

        An embedding gather on GPU does not check bounds, so an id outside
        the vocabulary would silently read another row.
        """
        return [
            tf.debugging.assert_equal(
                tf.shape(mask), tf.shape(word_ids),
                message="input_mask must have the shape of input_word_ids"),
            tf.debugging.assert_equal(
                tf.shape(type_ids), tf.shape(word_ids),
                message="input_type_ids must have the shape of input_word_ids"),
            tf.debugging.assert_less_equal(
                tf.shape(word_ids)[-1], self._max_positions,
                message=f"input_word_ids: sequence longer than "
                        f"max_position_embeddings={self._max_positions}"),
            tf.debugging.assert_non_negative(
                word_ids, message=f"input_word_ids: ids must be in [0, {self._vocab_size})"),
            tf.debugging.assert_less(
                word_ids, self._vocab_size,
                message=f"input_word_ids: ids must be in [0, {self._vocab_size})"),
            tf.debugging.assert_non_negative(
                type_ids,
                message=f"input_type_ids: ids must be in [0, {self._type_vocab_size})"),
            tf.debugging.assert_less(
                type_ids, self._type_vocab_size,
                message=f"input_type_ids: ids must be in [0, {self._type_vocab_size})"),
            tf.debugging.assert_non_negative(
                mask, message="input_mask: values must be 0 or 1"),
            tf.debugging.assert_less_equal(
                mask, 1, message="input_mask: values must be 0 or 1"),
        ]
