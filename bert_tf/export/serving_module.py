"""The exported `tf.Module`: a task model's variables, its tokenizer and signatures.

The Keras model is not tracked as an object: Keras 3 variables saved that
way get a second resource handle each, and TF1-style loaders (TF Serving's
C++ loader, `saved_model_cli run`) then restore one handle and read the
other. As Keras's own `ExportArchive` does, the module tracks the plain
`tf.Variable`s the signatures capture.

Signatures (outputs are float32, int32 or string; B batch, C choices, W words):
  serving_default  raw text in (see `text_signature_inputs`), by task kind:
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

import tensorflow as tf

from bert_tf.export import postprocess, text_inputs
from bert_tf.export.char_offsets import byte_to_char_offsets
from bert_tf.text.segment_packer import SegmentPacker

ENCODER_KINDS = ("encoder", "pretrainer")


def _text_spec(name, shape=(None,)):
    return tf.TensorSpec(shape, tf.string, name=name)


def text_signature_inputs(task_info):
    """Names and specs of `serving_default`'s inputs for a task."""
    kind = task_info["kind"]
    if kind in ("classifier", "regressor"):
        names = ("text", "text_pair") if task_info.get("text_inputs", 1) == 2 else ("text",)
        return [_text_spec(name) for name in names]
    if kind == "span_labeler":
        return [_text_spec("question"), _text_spec("context")]
    if kind == "multiple_choice":
        return [_text_spec("context"), _text_spec("choices", (None, task_info["num_choices"]))]
    return [_text_spec("text")]


def _float32(outputs):
    """Mixed-precision models compute in 16 bits; serve float32 always."""
    return {key: tf.cast(value, tf.float32) if value.dtype.is_floating else value
            for key, value in outputs.items()}


def _piece_offsets(offsets, positions, context_start, has_span):
    """Byte offset of the context piece at each packed position ([B]; 0 where
    `has_span` is False).

    Args:
      offsets: int64 RaggedTensor [B, (T)], one offset per context piece.
      positions: int32 [B] packed positions; context_start: int32 [B].
    """
    index = offsets.row_starts() + tf.cast(positions - context_start, tf.int64)  # [B]
    # One extra slot so rows without a span gather in range, even from no pieces.
    values = tf.concat([offsets.values, tf.zeros([1], tf.int64)], axis=0)
    index = tf.where(has_span, index, tf.size(offsets.values, out_type=tf.int64))
    return tf.gather(values, index)


def build_serving_module(model, tokenizer, task_info):
    """(tf.Module to save, {name: concrete function} signatures).

    Args:
      model: a bert_tf Keras model (encoder or any task model).
      tokenizer: the `BertTokenizer` the model was trained with (its vocab
        becomes an asset of the SavedModel).
      task_info: a task-info dict (`native.validate_task_info`).
    """
    signatures = ServingFunctions(model, tokenizer, task_info).signatures()
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


class ServingFunctions:
    """The signature functions: model, tokenizer and packer in one graph.

    Args: see `build_serving_module`.
    """

    def __init__(self, model, tokenizer, task_info):
        self.model = model
        self.encoder = getattr(model, "encoder", model)
        self.tokenizer = tokenizer
        self.task_info = dict(task_info)
        self.kind = task_info["kind"]
        self.packer = SegmentPacker.from_tokenizer(tokenizer, task_info["max_seq_length"])
        config = self.encoder.encoder_config
        self._vocab_size = tokenizer.vocab_size
        self._type_vocab_size = config.type_vocab_size
        self._max_positions = config.max_position_embeddings

    # --- signatures -------------------------------------------------------

    def signatures(self):
        """{name: concrete function} for `tf.saved_model.save`."""
        text_specs = text_signature_inputs(self.task_info)
        serving = tf.function(self._serve_text, input_signature=text_specs)
        encode = tf.function(self._encode_text, input_signature=[_text_spec("text")])
        id_shape = (None, self.task_info["num_choices"], None) if (
            self.kind == "multiple_choice") else (None, None)
        id_specs = [tf.TensorSpec(id_shape, tf.int32, name=name)
                    for name in ("input_word_ids", "input_mask", "input_type_ids")]
        token_ids = tf.function(self._serve_token_ids, input_signature=id_specs)
        return {
            "serving_default": serving.get_concrete_function(),
            "encode": encode.get_concrete_function(),
            "serve_token_ids": token_ids.get_concrete_function(),
        }

    def _serve_text(self, *texts):
        if self.kind in ("classifier", "regressor"):
            features = text_inputs.pack_texts(self.tokenizer, self.packer, texts)
            return self._head_outputs(features)
        if self.kind == "span_labeler":
            return self._answer_questions(*texts)
        if self.kind == "token_classifier":
            return self._label_words(texts[0])
        if self.kind == "multiple_choice":
            features = text_inputs.pack_choices(self.tokenizer, self.packer, *texts)
            return self._head_outputs(features)
        return self._encode_text(texts[0])

    def _encode_text(self, text):
        features = text_inputs.pack_texts(self.tokenizer, self.packer, [text])
        return self._encoder_outputs(features)

    def _serve_token_ids(self, input_word_ids, input_mask, input_type_ids):
        checks = self._check_token_ids(input_word_ids, input_mask, input_type_ids)
        with tf.control_dependencies(checks):
            features = {"token_ids": tf.identity(input_word_ids),
                        "segment_ids": tf.identity(input_type_ids),
                        "padding_mask": tf.identity(input_mask)}
        if self.kind in ENCODER_KINDS:
            return self._encoder_outputs(features)
        return self._head_outputs(features)

    # --- model calls ------------------------------------------------------

    def _encoder_outputs(self, features):
        outputs = self.encoder(features, training=False)
        return _float32({"pooled_output": outputs["pooled_output"],
                         "sequence_output": outputs["sequence_output"],
                         "padding_mask": features["padding_mask"]})

    def _head_outputs(self, features):
        """Outputs of the task head from packed features (no text needed)."""
        info = self.task_info
        logits = self.model(features, training=False)
        if self.kind == "classifier":
            return postprocess.class_outputs(logits["logits"], info["label_names"])
        if self.kind == "regressor":
            return postprocess.regression_outputs(logits["logits"])
        if self.kind == "multiple_choice":
            return postprocess.choice_outputs(logits["logits"])
        if self.kind == "token_classifier":
            token_logits = tf.cast(logits["logits"], tf.float32)  # [B, S, K]
            label_ids = tf.argmax(token_logits, axis=-1, output_type=tf.int32)  # [B, S]
            names = tf.constant(info["label_names"], tf.string)
            return {"logits": token_logits, "label_ids": label_ids,
                    "labels": tf.gather(names, label_ids)}
        # span_labeler
        start_logits, end_logits = logits["start_logits"], logits["end_logits"]
        allowed = postprocess.second_segment_mask(
            features["segment_ids"], features["padding_mask"])
        spans = postprocess.best_spans(
            start_logits, end_logits, allowed, info["max_answer_length"])
        outputs = {"start_logits": tf.cast(start_logits, tf.float32),
                   "end_logits": tf.cast(end_logits, tf.float32),
                   "start_index": spans["start_index"], "end_index": spans["end_index"],
                   "score": spans["score"]}
        if info["version_2_with_negative"]:
            outputs["no_answer_score"] = postprocess.no_answer_scores(start_logits, end_logits)
        return outputs

    def _answer_questions(self, questions, contexts):
        packed = text_inputs.pack_question_context(
            self.tokenizer, self.packer, questions, contexts,
            self.task_info["max_query_length"])
        head = self._head_outputs(packed.features)
        has_span = head["start_index"] >= 0
        if self.task_info["version_2_with_negative"]:
            # BERT predicts "no answer" when the null score beats the best span.
            has_span = tf.logical_and(has_span, head["score"] >= head["no_answer_score"])
        start_byte = _piece_offsets(packed.piece_starts, head["start_index"],
                                    packed.context_start, has_span)
        end_byte = _piece_offsets(packed.piece_ends, head["end_index"],
                                  packed.context_start, has_span)
        answer = tf.strings.substr(contexts, start_byte, end_byte - start_byte, unit="BYTE")
        chars = byte_to_char_offsets(contexts, tf.stack([start_byte, end_byte], axis=1))
        outputs = {
            "answer": answer,
            "start_char": tf.where(has_span, chars[:, 0], -1),
            "end_char": tf.where(has_span, chars[:, 1], -1),
            "score": head["score"],
        }
        if self.task_info["version_2_with_negative"]:
            outputs["no_answer_score"] = head["no_answer_score"]
        return outputs

    def _label_words(self, texts):
        packed = text_inputs.pack_words(self.tokenizer, self.packer, texts)
        head = self._head_outputs(packed.features)
        first = packed.first_piece  # [B, (W)]
        # [B, (W)] -> the label at each word's first piece, "" when it has none.
        rows = tf.cast(first.value_rowids(), tf.int32)
        cols = tf.maximum(first.flat_values, 0)
        labels = tf.gather_nd(head["labels"], tf.stack([rows, cols], axis=1))
        labels = first.with_flat_values(tf.where(first.flat_values >= 0, labels, ""))
        is_word = tf.ones_like(first.flat_values, tf.bool)
        is_word = first.with_flat_values(is_word).to_tensor(False)  # [B, W]
        starts = byte_to_char_offsets(texts, packed.word_starts.to_tensor(0))  # [B, W]
        ends = byte_to_char_offsets(texts, packed.word_ends.to_tensor(0))
        num_words = packed.words.row_lengths()
        return {
            "words": packed.words.to_tensor(""),
            "labels": labels.to_tensor(""),
            "word_start_char": tf.where(is_word, starts, -1),
            "word_end_char": tf.where(is_word, ends, -1),
            "num_words": tf.cast(num_words, tf.int32),
        }

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
