"""Serving kinds: what an export of each task kind takes, computes and returns.

One `ServingKind` per task kind, registered in `SERVING_KINDS` under the
kind's name (`TaskRecord.kind`). A kind supplies everything the export
branches on: the inputs of `serving_default`, how raw text is packed into
ids, how the model's outputs become serving outputs, the shape of
`serve_token_ids`' inputs and the sample inputs of the TF Serving warm-up
file. `serving_module` and `warmup` look the kind up once (`serving_kind`);
a new kind is a new class passed to `register_serving_kind`.

All graph methods run inside the export's `tf.function`s.

Tensor legend: B batch, S max_seq_length, K classes/labels, C choices,
W words, T context pieces, D hidden size.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Mapping
from typing import Any

import tensorflow as tf

from bert_tf.checkpoints.task_record import TaskRecord
from bert_tf.export import postprocess, text_inputs
from bert_tf.export.char_offsets import byte_to_char_offsets
from bert_tf.registry import Registry

Features = Mapping[str, tf.Tensor]
Outputs = dict[str, tf.Tensor]

# Warm-up sample texts: short, so the warm-up stays quick, and of two lengths.
_SENTENCES = ("the film is a delight from start to finish .",
              "A dull, lifeless remake that never finds its footing.")
_CONTEXT = "The Eiffel Tower was completed in 1889 and stands in Paris, France."


@dataclasses.dataclass(frozen=True)
class ServingContext:
    """What a kind's graph methods read: the model, its text pipeline and its record.

    Args:
      model: a bert_tf Keras model (encoder or task model).
      tokenizer: the `BertTokenizer` the model was trained with.
      packer: a `SegmentPacker` to `record.max_seq_length`.
      record: the export's `TaskRecord`.
    """

    model: Any
    tokenizer: Any
    packer: Any
    record: TaskRecord

    @property
    def encoder(self) -> Any:
        """The model's encoder (the model itself for an encoder)."""
        return getattr(self.model, "encoder", self.model)


def float32_outputs(outputs: Mapping[str, tf.Tensor]) -> Outputs:
    """Mixed-precision models compute in 16 bits; serve float32 always."""
    return {key: tf.cast(value, tf.float32) if value.dtype.is_floating else value
            for key, value in outputs.items()}


def encoder_outputs(context: ServingContext, features: Features) -> Outputs:
    """pooled_output [B, D], sequence_output [B, S, D] and padding_mask [B, S].

    Args:
      context: the export's model and text pipeline.
      features: packed token_ids, segment_ids, padding_mask.
    """
    outputs = context.encoder(features, training=False)
    return float32_outputs({"pooled_output": outputs["pooled_output"],
                            "sequence_output": outputs["sequence_output"],
                            "padding_mask": features["padding_mask"]})


def encode_text(context: ServingContext, text: tf.Tensor) -> Outputs:
    """The encoder outputs of raw texts [B] (also the `encode` signature of every kind).

    The batch runs at its longest text (rounded up to 8); `sequence_output`
    and `padding_mask` are then padded with zeros to max_seq_length, the
    shape they always had. As before, positions where `padding_mask` is 0
    carry no meaning (past the batch's length they are now zeros).
    """
    features = text_inputs.pack_texts(context.tokenizer, context.packer, [text])
    outputs = encoder_outputs(context, features)
    missing = context.packer.max_seq_length - tf.shape(features["padding_mask"])[1]
    for key in ("sequence_output", "padding_mask"):
        pad = [[0, 0], [0, missing]] + [[0, 0]] * (outputs[key].shape.rank - 2)
        outputs[key] = tf.pad(outputs[key], pad)
    return outputs


def same_batch_size(inputs: Mapping[str, tf.Tensor]) -> list[tf.Tensor]:
    """The `inputs`' values, in order, made to wait for a check that they share axis 0.

    Without it, inputs of different batch sizes fail inside the packer with an
    internal message ("Incompatible shapes: [2] vs. [3] at node Minimum")
    that names none of them; the check fails the request first, naming the
    first input, each other one and their batch sizes.

    Args:
      inputs: `{serving input name: tensor [B, ...]}`, in signature order.
    """
    (first_name, first), *others = inputs.items()
    first_size = tf.shape(first)[0]
    checks = []
    for name, tensor in others:
        size = tf.shape(tensor)[0]
        checks.append(tf.debugging.Assert(
            tf.equal(first_size, size),
            [f"serving inputs {first_name} and {name} must have the same batch size; "
             f"{first_name} has", first_size, f"rows, {name} has", size, "rows"]))
    with tf.control_dependencies(checks):
        return [tf.identity(tensor) for tensor in inputs.values()]


def text_spec(name: str, shape: tuple = (None,)) -> tf.TensorSpec:
    """A string input of `serving_default` named `name`."""
    return tf.TensorSpec(shape, tf.string, name=name)


class ServingKind(abc.ABC):
    """The serving contract of one task kind; instances are stateless.

    Args:
      name: the task kind served (`TaskRecord.kind`), the key in `SERVING_KINDS`.
    """

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    @abc.abstractmethod
    def text_inputs(self, record: TaskRecord) -> list[tf.TensorSpec]:
        """The inputs of `serving_default`, in positional order."""

    def token_ids_shape(self, record: TaskRecord) -> tuple:
        """The shape of each `serve_token_ids` input ([B, S] unless overridden)."""
        return (None, None)

    @abc.abstractmethod
    def serve_text(self, context: ServingContext, *texts: tf.Tensor) -> Outputs:
        """`serving_default`: the raw-text inputs (as `text_inputs`) -> outputs."""

    @abc.abstractmethod
    def serve_features(self, context: ServingContext, features: Features) -> Outputs:
        """`serve_token_ids`: packed, checked features -> the outputs that need no text."""

    @abc.abstractmethod
    def sample_inputs(self, record: TaskRecord) -> dict[str, list]:
        """Representative `serving_default` inputs for warm-up: {name: list of rows}."""


class EncoderKind(ServingKind):
    """Encoders and pretrainers: text [B] -> the encoder's outputs."""

    def text_inputs(self, record):
        return [text_spec("text")]

    def serve_text(self, context, text):
        return encode_text(context, text)

    def serve_features(self, context, features):
        return encoder_outputs(context, features)

    def sample_inputs(self, record):
        return {"text": list(_SENTENCES)}


class HeadKind(ServingKind):
    """A task model: serving outputs come from its head's outputs."""

    def serve_features(self, context, features):
        return self.postprocess(context, context.model(features, training=False), features)

    @abc.abstractmethod
    def postprocess(self, context: ServingContext, model_outputs: Features,
                    features: Features) -> Outputs:
        """The head's outputs (dict of logits) -> serving outputs."""


class ClassifierKind(HeadKind):
    """text [B] (+ text_pair [B]) -> logits, probabilities [B, K], label_id, label [B]."""

    def text_inputs(self, record):
        names = ("text", "text_pair") if record.text_inputs == 2 else ("text",)
        return [text_spec(name) for name in names]

    def serve_text(self, context, *texts):
        names = [spec.name for spec in self.text_inputs(context.record)]
        texts = same_batch_size(dict(zip(names, texts)))
        features = text_inputs.pack_texts(context.tokenizer, context.packer, texts)
        return self.serve_features(context, features)

    def postprocess(self, context, model_outputs, features):
        return postprocess.class_outputs(model_outputs["logits"], context.record.label_names)

    def sample_inputs(self, record):
        if record.text_inputs == 2:
            return {"text": list(_SENTENCES), "text_pair": list(reversed(_SENTENCES))}
        return {"text": list(_SENTENCES)}


class RegressorKind(ClassifierKind):
    """text [B] (+ text_pair [B]) -> score [B]."""

    def postprocess(self, context, model_outputs, features):
        return postprocess.regression_outputs(model_outputs["logits"])


class MultipleChoiceKind(HeadKind):
    """context [B], choices [B, C] -> logits, probabilities [B, C], choice_id [B]."""

    def text_inputs(self, record):
        return [text_spec("context"), text_spec("choices", (None, record.num_choices))]

    def token_ids_shape(self, record):
        return (None, record.num_choices, None)

    def serve_text(self, context, contexts, choices):
        contexts, choices = same_batch_size({"context": contexts, "choices": choices})
        features = text_inputs.pack_choices(context.tokenizer, context.packer, contexts, choices)
        return self.serve_features(context, features)

    def postprocess(self, context, model_outputs, features):
        return postprocess.choice_outputs(model_outputs["logits"])

    def sample_inputs(self, record):
        choices = [f"choice {i} of the ending ." for i in range(record.num_choices)]
        return {"context": [_SENTENCES[0]], "choices": [choices]}


class TokenClassifierKind(HeadKind):
    """text [B], split on whitespace -> a label per word (see `serving_module`)."""

    def text_inputs(self, record):
        return [text_spec("text")]

    def postprocess(self, context, model_outputs, features):
        token_logits = tf.cast(model_outputs["logits"], tf.float32)  # [B, S, K]
        label_ids = tf.argmax(token_logits, axis=-1, output_type=tf.int32)  # [B, S]
        names = tf.constant(context.record.label_names, tf.string)
        return {"logits": token_logits, "label_ids": label_ids,
                "labels": tf.gather(names, label_ids)}

    def serve_text(self, context, texts):
        packed = text_inputs.pack_words(context.tokenizer, context.packer, texts)
        head = self.serve_features(context, packed.features)
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

    def sample_inputs(self, record):
        return {"text": list(_SENTENCES)}


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


class SpanLabelerKind(HeadKind):
    """question, context [B] -> answer [B] and its character span (see `serving_module`)."""

    def text_inputs(self, record):
        return [text_spec("question"), text_spec("context")]

    def postprocess(self, context, model_outputs, features):
        record = context.record
        start_logits, end_logits = model_outputs["start_logits"], model_outputs["end_logits"]
        allowed = postprocess.second_segment_mask(
            features["segment_ids"], features["padding_mask"])
        spans = postprocess.best_spans(
            start_logits, end_logits, allowed, record.max_answer_length)
        outputs = {"start_logits": tf.cast(start_logits, tf.float32),
                   "end_logits": tf.cast(end_logits, tf.float32),
                   "start_index": spans["start_index"], "end_index": spans["end_index"],
                   "score": spans["score"]}
        if record.version_2_with_negative:
            outputs["no_answer_score"] = postprocess.no_answer_scores(start_logits, end_logits)
        return outputs

    def serve_text(self, context, questions, contexts):
        record = context.record
        questions, contexts = same_batch_size({"question": questions, "context": contexts})
        packed = text_inputs.pack_question_context(
            context.tokenizer, context.packer, questions, contexts, record.max_query_length)
        head = self.serve_features(context, packed.features)
        has_span = head["start_index"] >= 0
        if record.version_2_with_negative:
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
        if record.version_2_with_negative:
            outputs["no_answer_score"] = head["no_answer_score"]
        return outputs

    def sample_inputs(self, record):
        return {"question": ["Where is the Eiffel Tower?", "When was it completed?"],
                "context": [_CONTEXT, _CONTEXT]}


# Kind name -> its serving contract. Encoders and pretrainers serve the same
# encoder outputs (a pretrainer's heads are for training only).
SERVING_KINDS: Registry[ServingKind] = Registry("serving kind", ServingKind)


def register_serving_kind(kind: ServingKind) -> ServingKind:
    """Adds `kind` to `SERVING_KINDS` under `kind.name`; returns it.

    Args:
      kind: the serving contract of a task kind not yet registered.

    Raises:
      TypeError: `kind` is not a `ServingKind`.
      ValueError: its name is empty or registered already.
    """
    return SERVING_KINDS.add(kind)


def serving_kind(name: str) -> ServingKind:
    """The registered serving contract of the task kind `name`.

    Args:
      name: a task kind, e.g. `TaskRecord.kind`.

    Raises:
      ValueError: naming the unknown kind and the known ones.
    """
    return SERVING_KINDS.lookup(name)


for _kind in (ClassifierKind("classifier"), RegressorKind("regressor"),
              SpanLabelerKind("span_labeler"), TokenClassifierKind("token_classifier"),
              MultipleChoiceKind("multiple_choice"), EncoderKind("encoder"),
              EncoderKind("pretrainer")):
    register_serving_kind(_kind)
del _kind
