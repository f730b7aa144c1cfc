"""A task model that takes raw text: a `TextPreprocessor` in front of it."""

from __future__ import annotations

import keras

from bert_tf.layers.text_preprocessor import TextPreprocessor
from bert_tf.models.bert_encoder import BertEncoder
from bert_tf.models.bert_multiple_choice import BertMultipleChoice
from bert_tf.models.task_model import TaskModel

# The string inputs, named as the raw-text signatures of bert_tf's own exports.
TEXT_INPUT_NAMES = ("text", "text_pair")


@keras.saving.register_keras_serializable(package="bert_tf")
class TextModel(keras.Model):
    r"""`preprocessor` then `task_model`, as one functional model over named strings.

    Inputs: a dict of string batches [B], `text` (and `text_pair` with
    `text_inputs=2`), the names bert_tf's SavedModel exports use, so
    `model.export(path)` serves `serving_default` with those inputs.
    Outputs: the task model's, e.g. `logits` for a `BertClassifier`.

    `fit`, `evaluate` and `predict` take the same dict, e.g. a `tf.data`
    dataset of `({"text": strings}, labels)`; the model is saved whole to a
    `.keras` file, vocabulary included. The task model is the same object
    (shared weights), so it can also be trained on pre-tokenized batches.

    Args:
      preprocessor: the `TextPreprocessor` (its vocabulary must be the one
        the encoder was trained with).
      task_model: any model taking `token_ids`, `segment_ids` and
        `padding_mask` [B, S]: a `BertEncoder` or a bert_tf task model other
        than `BertMultipleChoice` (whose inputs are [B, C, S]).
      text_inputs: 1 for single texts, 2 for pairs (packed as
        `[CLS] text [SEP] text_pair [SEP]`).
      **kwargs: `keras.Model` arguments (`name`, `trainable`).

    Raises:
      TypeError: `preprocessor` is not a `TextPreprocessor`.
      ValueError: `text_inputs` is not 1 or 2, the task model is a
        `BertMultipleChoice`, or the preprocessor does not fit its encoder
        (more token ids than its vocab_size, longer sequences than its
        max_position_embeddings).

    Examples:
        A tiny vocabulary and encoder (yours come from a checkpoint, e.g.
        `bert_tf.load_preprocessor` and `bert_tf.load_encoder`):

        >>> import os, tempfile
        >>> import numpy as np
        >>> from bert_tf.layers import TextPreprocessor
        >>> from bert_tf.models import BertClassifier, BertEncoder, TextModel
        >>> tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "##s"]
        >>> vocab_file = os.path.join(tempfile.mkdtemp(), "vocab.txt")
        >>> with open(vocab_file, "w") as f:
        ...     print(*tokens, sep="\n", file=f)
        >>> encoder = BertEncoder(vocab_size=len(tokens), hidden_size=16, num_layers=2,
        ...                       num_heads=2, intermediate_size=32, max_position_embeddings=16)
        >>> model = TextModel(TextPreprocessor(vocab_file, max_seq_length=8),
        ...                   BertClassifier(encoder, num_classes=2))
        >>> tuple(model({"text": np.array(["the cat sat", "the cats"])})["logits"].shape)
        (2, 2)
        >>> pairs = TextModel(TextPreprocessor(vocab_file, max_seq_length=8),
        ...                   BertClassifier(encoder, num_classes=3), text_inputs=2)
        >>> outputs = pairs({"text": np.array(["the cat"]), "text_pair": np.array(["sat"])})
        >>> tuple(outputs["logits"].shape)
        (1, 3)
    """

    def __init__(self, preprocessor: TextPreprocessor, task_model: keras.Model,
                 text_inputs: int = 1, **kwargs):
        if not isinstance(preprocessor, TextPreprocessor):
            raise TypeError(f"TextModel: preprocessor must be a bert_tf TextPreprocessor, got "
                            f"{type(preprocessor).__name__}")
        if text_inputs not in (1, 2):
            raise ValueError(f"TextModel: text_inputs must be 1 (texts) or 2 (text pairs), "
                             f"got {text_inputs!r}")
        _check_fits(preprocessor, task_model)
        names = TEXT_INPUT_NAMES[:text_inputs]
        inputs = {name: keras.Input(shape=(), dtype="string", name=name) for name in names}
        texts = tuple(inputs[name] for name in names)
        features = preprocessor(texts if text_inputs == 2 else texts[0])
        super().__init__(inputs=inputs, outputs=task_model(features), **kwargs)
        self.preprocessor = preprocessor
        self.task_model = task_model
        self.text_inputs = text_inputs

    def get_config(self) -> dict:
        return {"name": self.name, "trainable": self.trainable,
                "preprocessor": keras.saving.serialize_keras_object(self.preprocessor),
                "task_model": keras.saving.serialize_keras_object(self.task_model),
                "text_inputs": self.text_inputs}

    @classmethod
    def from_config(cls, config: dict) -> TextModel:
        config = dict(config)
        for key in ("preprocessor", "task_model"):
            config[key] = keras.saving.deserialize_keras_object(config[key])
        return cls(**config)


def _check_fits(preprocessor: TextPreprocessor, task_model: keras.Model) -> None:
    """Refuses a preprocessor whose ids or lengths the task model's encoder cannot take.

    A vocabulary-less preprocessor (being loaded from a `.keras` file) is
    checked on length only: its vocabulary is the one it was saved with.
    """
    if isinstance(task_model, BertMultipleChoice):
        raise ValueError("TextModel: a BertMultipleChoice takes [batch, choices, seq] inputs; "
                         "the preprocessor packs one sequence per text")
    if isinstance(task_model, BertEncoder):
        config = task_model.encoder_config
    elif isinstance(task_model, TaskModel):
        config = task_model.encoder.encoder_config
    else:
        return  # not a bert_tf model: no encoder config to check against
    if preprocessor.max_seq_length > config.max_position_embeddings:
        raise ValueError(
            f"TextModel: the preprocessor packs {preprocessor.max_seq_length} tokens but the "
            f"encoder has max_position_embeddings={config.max_position_embeddings}")
    if preprocessor.has_vocabulary and preprocessor.vocab_size > config.vocab_size:
        raise ValueError(
            f"TextModel: the preprocessor's vocabulary has {preprocessor.vocab_size} tokens "
            f"but the encoder's vocab_size is {config.vocab_size}")
