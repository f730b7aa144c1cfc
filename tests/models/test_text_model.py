"""Text-in Keras models: a TextPreprocessor in front of a task model, saved to `.keras` with
its vocabulary, exported with Keras's `model.export` and served as raw text."""

import os
import zipfile

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.framework import config as tf_config

import bert_tf
from bert_tf.checkpoints import loading
from bert_tf.checkpoints.task_record import TaskRecord
from bert_tf.export import warmup
from bert_tf.layers import TextPreprocessor
from bert_tf.models import BertClassifier, BertEncoder, BertMultipleChoice, TextModel
from bert_tf.text.tokenizer_contract import TokenizerContractError, contract_from_vocab
from tests.export.export_helpers import run_serving_contract
from tests.helpers import TINY, write_tiny_vocab

TEXTS = ["The film was a delight.", "dull and too long", "Funny, not bad!"]
PAIRS = ["it is good", "the plot was long", "very fun"]
LENGTH = 16


def _classifier(seed=0, num_classes=2):
    keras.utils.set_random_seed(seed)
    return BertClassifier(BertEncoder.from_encoder_config(TINY), num_classes=num_classes)


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    return write_tiny_vocab(tmp_path_factory.mktemp("vocab"))


def _logits(outputs):
    return np.asarray(outputs["logits"])


def test_a_sequential_text_model_saves_with_its_vocabulary_and_loads_identically(tmp_path):
    vocab = write_tiny_vocab(tmp_path)
    with open(vocab, "rb") as f:
        vocab_bytes = f.read()
    preprocessor = TextPreprocessor(vocab, max_seq_length=LENGTH)
    classifier = _classifier()
    model = keras.Sequential([keras.Input(shape=(), dtype="string"), preprocessor, classifier])
    texts = tf.constant(TEXTS)
    # Eager calls throughout: each traced predict function costs a trace of the tokenizer.
    before = _logits(model(texts, training=False))
    # The model is the preprocessor then the classifier, nothing else.
    assert np.array_equal(before, _logits(classifier(preprocessor(texts), training=False)))

    path = str(tmp_path / "model.keras")
    model.save(path)
    with zipfile.ZipFile(path) as archive:
        assets = [name for name in archive.namelist() if name.endswith("vocab.txt")]
        assert len(assets) == 1 and archive.read(assets[0]) == vocab_bytes
    os.remove(vocab)  # the archive alone must do
    loaded = keras.saving.load_model(path)
    assert np.array_equal(_logits(loaded(texts, training=False)), before)
    reloaded = loaded.layers[0]
    assert isinstance(reloaded, TextPreprocessor) and reloaded is not preprocessor
    assert (reloaded.tokenizer.tokenizer_contract()
            == preprocessor.tokenizer.tokenizer_contract())


def test_a_text_model_of_pairs_is_the_classifier_on_packed_pairs(vocab_file, tmp_path):
    preprocessor = TextPreprocessor(vocab_file, max_seq_length=LENGTH)
    classifier = _classifier(seed=1)
    model = TextModel(preprocessor, classifier, text_inputs=2)
    assert [tensor.name for tensor in model.inputs] == ["text", "text_pair"]
    inputs = {"text": tf.constant(TEXTS), "text_pair": tf.constant(PAIRS)}
    outputs = _logits(model(inputs, training=False))
    packed = preprocessor((inputs["text"], inputs["text_pair"]))
    assert np.array_equal(outputs, _logits(classifier(packed, training=False)))

    path = str(tmp_path / "pairs.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert type(loaded) is TextModel and loaded.text_inputs == 2
    assert isinstance(loaded.task_model, BertClassifier)
    assert np.array_equal(_logits(loaded(inputs, training=False)), outputs)
    # XLA has no string kernels: Keras refuses jit_compile for the text model only.
    # (Keras also refuses it under op determinism, which another test in this process
    # may have turned on: off here, then as it was.)
    determinism = tf_config.is_op_determinism_enabled()
    tf_config.disable_op_determinism()
    try:
        with pytest.warns(UserWarning, match="Model doesn't support `jit_compile=True`"):
            loaded.compile(loss={"logits": "sparse_categorical_crossentropy"}, jit_compile=True)
        assert loaded.jit_compile is False
        classifier.compile(loss={"logits": "sparse_categorical_crossentropy"}, jit_compile=True)
        assert classifier.jit_compile is True
    finally:
        if determinism:
            tf_config.enable_op_determinism()
    # load_encoder reads a saved text model's encoder.
    encoder = bert_tf.load_encoder(path)
    assert [w.tolist() for w in encoder.get_weights()] == [
        w.tolist() for w in classifier.encoder.get_weights()]


def test_load_preprocessor_takes_the_checkpoints_vocabulary_and_casing(vocab_file, tmp_path):
    encoder = BertEncoder.from_encoder_config(TINY)
    checkpoint = str(tmp_path / "checkpoint")
    loading.save(encoder, checkpoint, vocab_file=vocab_file, lower_case=True)
    preprocessor = bert_tf.load_preprocessor(checkpoint, max_seq_length=LENGTH)
    assert preprocessor.max_seq_length == LENGTH
    assert preprocessor.tokenizer.tokenizer_contract() == contract_from_vocab(vocab_file, True)
    with pytest.raises(TokenizerContractError, match="lower_case=False but the"):
        bert_tf.load_preprocessor(checkpoint, lower_case=False)
    os.remove(os.path.join(checkpoint, "vocab.txt"))
    with pytest.raises(FileNotFoundError) as error:
        bert_tf.load_preprocessor(checkpoint)
    assert str(error.value) == (f"{checkpoint}: the checkpoint ships no vocab.txt; pass "
                                "vocab_file= (the vocabulary it was trained with)")


def test_a_text_model_refuses_a_preprocessor_its_encoder_cannot_take(vocab_file, tmp_path):
    classifier = _classifier()
    too_long = TextPreprocessor(vocab_file, max_seq_length=TINY.max_position_embeddings + 1)
    with pytest.raises(ValueError, match="^TextModel: the preprocessor packs 33 tokens but the "
                                         "encoder has max_position_embeddings=32$"):
        TextModel(too_long, classifier)
    big = write_tiny_vocab(tmp_path, tokens=[f"t{i}" for i in range(TINY.vocab_size)]
                           + ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    with pytest.raises(ValueError, match="^TextModel: the preprocessor's vocabulary has 105 "
                                         "tokens but the encoder's vocab_size is 100$"):
        TextModel(TextPreprocessor(big, max_seq_length=LENGTH), classifier)
    with pytest.raises(ValueError, match="^TextModel: a BertMultipleChoice takes"):
        TextModel(TextPreprocessor(vocab_file),
                  BertMultipleChoice(BertEncoder.from_encoder_config(TINY), num_choices=2))
    with pytest.raises(ValueError, match="text_inputs must be 1 .* or 2 .*, got 3"):
        TextModel(TextPreprocessor(vocab_file), classifier, text_inputs=3)
    with pytest.raises(TypeError, match="preprocessor must be a bert_tf TextPreprocessor, got "
                                        "TextVectorization"):
        TextModel(keras.layers.TextVectorization(), classifier)


# --- model.export ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def exported(vocab_file, tmp_path_factory):
    """(text model of pairs, the directory Keras's `model.export` wrote)."""
    model = TextModel(TextPreprocessor(vocab_file, max_seq_length=LENGTH), _classifier(seed=2),
                      text_inputs=2)
    path = str(tmp_path_factory.mktemp("keras_export") / "1")
    model.export(path, verbose=False)
    return model, path


# Exporting, loading and first calling the SavedModel take ~10 CPU seconds (~30 s shared).
@pytest.mark.long
def test_model_export_serves_raw_text_pairs(exported):
    model, path = exported
    served = tf.saved_model.load(path).signatures["serving_default"]
    assert sorted(served.structured_input_signature[1]) == ["text", "text_pair"]
    answer = served(text=tf.constant(TEXTS), text_pair=tf.constant(PAIRS))
    assert sorted(answer) == ["logits"]
    expected = _logits(model({"text": tf.constant(TEXTS), "text_pair": tf.constant(PAIRS)},
                             training=False))
    assert np.allclose(answer["logits"].numpy(), expected, atol=1e-6)


def keras_export_problems(summary, inputs):
    """How a Keras export's summary (`serving_contract.py`) breaks TF Serving's contract."""
    problems = [f"load {loader}: {error}" for loader, error in summary["load_errors"].items()]
    problems += [f"unregistered op {found['op']} in {found['function']}"
                 for found in summary["ops"]["unregistered"]]
    problems += [f"Python op {found['op']} in {found['function']}"
                 for found in summary["ops"]["python"]]
    declared = summary["signatures"]["serving_default"]["inputs"]
    if declared != {name: {"dtype": "string", "shape": [-1]} for name in inputs}:
        problems.append(f"serving_default inputs {declared}")
    for index, record in enumerate(summary["warmup"]):
        problems += [f"warm-up {index}: {error}" for error in record["request_errors"]]
        if sorted(record["runs"]) != ["saved_model_load", "session"]:
            problems.append(f"warm-up {index}: replayed by {sorted(record['runs'])}")
        for loader, run in record["runs"].items():
            if run["error"]:
                problems.append(f"warm-up {index} ({loader}): {run['error']}")
            problems += [f"warm-up {index} ({loader}): {m}" for m in run["mismatches"]]
    return problems


@pytest.mark.long
def test_model_export_meets_the_serving_contract_in_a_fresh_process(exported, tmp_path):
    """Only tensorflow and tensorflow_text imported: every op registered, none calls Python,
    both loaders load it, and TF Serving's warm-up requests replay through serving_default."""
    _, path = exported
    record = TaskRecord(kind="classifier", name="sst2", max_seq_length=LENGTH,
                        label_names=("negative", "positive"), text_inputs=2)
    warmup.write_warmup_requests(path, "text_model", record)
    result = run_serving_contract([path], str(tmp_path))
    assert result["modules"] == []
    summary = result["exports"][path]
    assert keras_export_problems(summary, ["text", "text_pair"]) == []
    assert sorted(summary["signatures"]) == ["serve", "serving_default"]
    assert [r["batch_size"] for r in summary["warmup"]] == [1, 2, 1, 2]
    assert summary["warmup"][3]["runs"]["session"]["outputs"] == {"logits": [2, 2]}
    assert summary["ops"]["op_types"] > 30  # the walk reached the functions' ops
