"""`load_encoder` / `load_pretrainer`: one entry point for every format;
`load_preprocessor`: the matching `TextPreprocessor` (vocabulary and casing).

The formats, their detection order and what each reads and writes are in
`formats.FORMATS` (see `bert_tf.checkpoints.formats`): bert_tf directories
and training runs, `.keras` files, Hugging Face, Google TF1 and Model
Garden checkpoints.
"""

from __future__ import annotations

from typing import Any

from bert_tf.checkpoints import formats
from bert_tf.checkpoints.formats import (
    FORMATS,
    CheckpointInfo,
    LoadResult,
    detect_format,
)
from bert_tf.checkpoints.task_record import TaskRecord
from bert_tf.layers.text_preprocessor import TextPreprocessor
from bert_tf.models.bert_encoder import BertEncoder
from bert_tf.models.bert_pretrainer import BertPretrainer
from bert_tf.text import tokenizer_contract as contracts

__all__ = ["FORMATS", "CheckpointInfo", "LoadResult", "describe", "detect_format", "load",
           "load_encoder", "load_preprocessor", "load_pretrainer", "save"]


def describe(path: str, format: str | None = None,
             hidden_act: str | None = None) -> CheckpointInfo:
    """The format, encoder config, tokenizer contract and shipped vocab of `path`.

    Fine-tuning uses it to size the model and find the vocabulary before
    any weight is read. `keras` files are not described (load them).

    Args:
      path: checkpoint directory, file or prefix.
      format: one of `FORMATS`; detected when None.
      hidden_act: overrides the activation (see `load`).
    """
    return formats.get_format(format or detect_format(path)).describe(path, hidden_act)


def load(path: str, model_type: str = "encoder", format: str | None = None,
         hidden_act: str | None = None, vocab_file: str | None = None,
         lower_case: bool | None = None, use_nsp: bool = True,
         dtype: str | None = None) -> LoadResult:
    """Loads a checkpoint into a new `BertEncoder`, `BertPretrainer` or task model.

    Args:
      path: checkpoint directory, file or prefix.
      model_type: "encoder", "pretrainer" or "task". A pretrainer loaded from a
        checkpoint without pretraining heads gets freshly initialised heads
        (listed in `LoadResult.initialised`). "task" loads the model as it was
        trained, head included (a bert_tf directory or training run, or a
        `.keras` file), with its `LoadResult.task_record` when one is recorded.
      format: one of `FORMATS`; detected when None.
      hidden_act: overrides the activation (Model Garden checkpoints do not
        record it; Google's "gelu" is read as the tanh form).
      vocab_file, lower_case: when given, checked against the checkpoint's
        tokenizer contract; a mismatch raises `TokenizerContractError`.
      use_nsp: a pretrainer gets a next-sentence head.
      dtype: a Keras dtype policy name, e.g. "mixed_bfloat16".

    Raises:
      FileNotFoundError: nothing at `path`.
      ValueError: an unknown format or model type, an unrecognised or
        malformed checkpoint, or weights that do not fit.
    """
    if model_type not in formats.MODEL_TYPES:
        raise ValueError(f"model_type must be one of {', '.join(formats.MODEL_TYPES)}, "
                         f"got {model_type!r}")
    fmt = formats.get_format(format or detect_format(path))
    return fmt.load(path, model_type, hidden_act=hidden_act, vocab_file=vocab_file,
                    lower_case=lower_case, use_nsp=use_nsp, dtype=dtype)


def load_encoder(path: str, format: str | None = None, hidden_act: str | None = None,
                 vocab_file: str | None = None, lower_case: bool | None = None,
                 dtype: str | None = None) -> BertEncoder:
    """Loads a pretrained `BertEncoder` from any supported checkpoint format.

    The equivalent of `from_pretrained`: `path` may be a bert_tf directory or
    training run, a `.keras` file, a Hugging Face directory or safetensors
    file, a Google TF1 checkpoint directory, or a Model Garden checkpoint.

    Args:
      path: checkpoint directory, file or prefix.
      format: one of `FORMATS`; detected when None.
      hidden_act: overrides the recorded activation, e.g. "gelu" (exact) or
        "gelu_tanh"; Model Garden checkpoints record none (tanh assumed).
      vocab_file: a vocabulary to check against the checkpoint's tokenizer contract.
      lower_case: the casing to check (default: the recorded one).
      dtype: a Keras dtype policy name, e.g. "mixed_bfloat16".

    Raises:
      See `load`; `TokenizerContractError` when the vocab does not match.

    Examples:
        A tiny encoder saved in bert_tf's format, then loaded back by path:

        >>> import os, tempfile
        >>> import bert_tf
        >>> from bert_tf.checkpoints import loading
        >>> from bert_tf.models import BertEncoder
        >>> scratch = tempfile.TemporaryDirectory()
        >>> tiny = BertEncoder(vocab_size=100, hidden_size=16, num_layers=2, num_heads=2,
        ...                    intermediate_size=32)
        >>> path = loading.save(tiny, os.path.join(scratch.name, "tiny"))
        >>> encoder = bert_tf.load_encoder(path)  # the format is detected
        >>> encoder.encoder_config.num_layers, encoder.encoder_config.hidden_act
        (2, 'gelu')
        >>> scratch.cleanup()

        A Hugging Face, Google or Model Garden checkpoint loads the same way:
        `bert_tf.load_encoder("path/to/checkpoint")`.
    """
    return load(path, "encoder", format, hidden_act, vocab_file, lower_case,
                dtype=dtype).model


def load_pretrainer(path: str, format: str | None = None, hidden_act: str | None = None,
                    vocab_file: str | None = None, lower_case: bool | None = None,
                    use_nsp: bool = True, dtype: str | None = None) -> BertPretrainer:
    """Loads a `BertPretrainer` (encoder + MLM/NSP heads) from any format.

    Heads absent from the checkpoint are freshly initialised.

    Args:
      path, format, hidden_act, vocab_file, lower_case, dtype: as `load_encoder`.
      use_nsp: build the next-sentence head.

    Raises:
      See `load`.

    Examples:
        A checkpoint of an encoder alone: the heads start fresh (MLM only here):

        >>> import os, tempfile
        >>> import bert_tf
        >>> from bert_tf.checkpoints import loading
        >>> from bert_tf.models import BertEncoder
        >>> scratch = tempfile.TemporaryDirectory()
        >>> tiny = BertEncoder(vocab_size=100, hidden_size=16, num_layers=2, num_heads=2,
        ...                    intermediate_size=32)
        >>> path = loading.save(tiny, os.path.join(scratch.name, "tiny"))
        >>> pretrainer = bert_tf.load_pretrainer(path, use_nsp=False)
        >>> pretrainer.use_nsp, pretrainer.encoder.encoder_config.vocab_size
        (False, 100)
        >>> scratch.cleanup()
    """
    return load(path, "pretrainer", format, hidden_act, vocab_file, lower_case,
                use_nsp=use_nsp, dtype=dtype).model


def load_preprocessor(path: str, max_seq_length: int = 128, format: str | None = None,
                      vocab_file: str | None = None, lower_case: bool | None = None,
                      pad_to_multiple: int | None = None) -> TextPreprocessor:
    """A `TextPreprocessor` with the vocabulary and casing of a checkpoint.

    The text-side partner of `load_encoder`: the checkpoint's own vocabulary
    (`vocab.txt` beside the weights, or a KerasHub preset's tokenizer asset)
    and its recorded casing (guessed from the vocabulary when unrecorded).

    Args:
      path: checkpoint directory, file or prefix (not a `.keras` file: a
        saved `TextModel` holds its preprocessor, `model.preprocessor`).
      max_seq_length: the packed length (see `TextPreprocessor`).
      format: one of `FORMATS`; detected when None.
      vocab_file: the vocabulary, for a checkpoint that ships none; checked
        against the checkpoint's tokenizer contract when it records one.
      lower_case: overrides the recorded casing (checked like `vocab_file`).
      pad_to_multiple: see `TextPreprocessor`.

    Raises:
      FileNotFoundError: nothing at `path`, or no vocabulary shipped or given.
      TokenizerContractError: `vocab_file` or `lower_case` do not match the checkpoint's.
      ValueError: see `describe`.

    Examples:
        A tiny encoder saved with a vocabulary; its preprocessor takes raw text:

        >>> import os, tempfile
        >>> import bert_tf
        >>> from bert_tf.checkpoints import loading
        >>> from bert_tf.models import BertEncoder
        >>> scratch = tempfile.TemporaryDirectory()
        >>> tiny = BertEncoder(vocab_size=30522, hidden_size=16, num_layers=1, num_heads=2,
        ...                    intermediate_size=32)
        >>> path = loading.save(tiny, os.path.join(scratch.name, "tiny"), vocab_file=vocab_file,
        ...                     lower_case=True)
        >>> preprocessor = bert_tf.load_preprocessor(path, max_seq_length=8)
        >>> features = preprocessor(["Hello, world!"])
        >>> features["token_ids"].numpy().tolist()  # [CLS] hello , world ! [SEP], padded
        [[101, 7592, 1010, 2088, 999, 102, 0, 0]]
        >>> features["padding_mask"].numpy().tolist()
        [[1, 1, 1, 1, 1, 1, 0, 0]]
        >>> scratch.cleanup()
    """
    info = describe(path, format)
    contract = info.tokenizer_contract
    vocab = vocab_file or info.vocab_file
    if vocab is None:
        raise FileNotFoundError(f"{path}: the checkpoint ships no vocab.txt; pass "
                                "vocab_file= (the vocabulary it was trained with)")
    if lower_case is None:
        lower_case = contract["lower_case"] if contract else contracts.guess_lower_case(vocab)
    if contract:
        contracts.check_contract(contract, vocab, lower_case, source=path)
    return TextPreprocessor(vocab, lower_case=lower_case, max_seq_length=max_seq_length,
                            pad_to_multiple=pad_to_multiple)


def save(model: Any, directory: str, format: str = "bert_tf", vocab_file: str | None = None,
         lower_case: bool | None = None, tokenizer_contract: dict | None = None,
         task_record: TaskRecord | None = None) -> str:
    """Writes an encoder, a pretrainer or a fine-tuned model in a writable format of `FORMATS`.

    Args:
      model: a `BertEncoder`, a `BertPretrainer`, or a task model whose head the
        format holds (bert_tf: every one; KerasHub: a `BertClassifier`).
      directory: the output directory.
      format: "bert_tf", "google", "hf", "garden", "kerashub" or another registered
        writable format.
      vocab_file: copied beside the weights (and its contract recorded by bert_tf).
      lower_case: the tokenizer's casing, recorded where the format can.
      tokenizer_contract: bert_tf only: the contract to record as is.
      task_record: a task model's record (`LoadResult.task_record`): bert_tf
        stores it; KerasHub pads its preprocessor to its `max_seq_length`.

    Raises:
      ValueError: `format` is unknown or read only, or cannot hold `model`'s heads
        (Model Garden and KerasHub hold no pretraining heads).
    """
    writer = formats.get_writer(format)
    formats.check_holds(writer, model)
    return writer.save(model, directory, vocab_file=vocab_file, lower_case=lower_case,
                       tokenizer_contract=tokenizer_contract, task_record=task_record)
