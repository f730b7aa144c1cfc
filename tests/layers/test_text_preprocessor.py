"""TextPreprocessor: raw strings -> encoder inputs, as BERT packs them, in every input form."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.layers import TextPreprocessor
from tests.helpers import TINY_VOCAB, tiny_ids, write_tiny_vocab

PAD = TINY_VOCAB.index("[PAD]")
KEYS = ["padding_mask", "segment_ids", "token_ids"]


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    return write_tiny_vocab(tmp_path_factory.mktemp("vocab"))


@pytest.fixture(scope="module")
def preprocessor(vocab_file):
    return TextPreprocessor(vocab_file, max_seq_length=10)


def _row(ids, length):
    return ids + [PAD] * (length - len(ids))


def _numpy(features):
    assert sorted(features) == KEYS
    return {key: np.asarray(value) for key, value in features.items()}


def test_single_texts_are_lower_cased_split_and_packed(preprocessor):
    features = _numpy(preprocessor(["The film was a delight.", "Funny, not dull!", "Zebras"]))
    assert features["token_ids"].tolist() == [
        _row(tiny_ids("[CLS]", "the", "film", "was", "a", "delight", ".", "[SEP]"), 10),
        _row(tiny_ids("[CLS]", "fun", "##ny", ",", "not", "dull", "!", "[SEP]"), 10),
        _row(tiny_ids("[CLS]", "[UNK]", "[SEP]"), 10)]
    assert features["padding_mask"].sum(axis=1).tolist() == [8, 8, 3]
    assert features["segment_ids"].tolist() == [[0] * 10] * 3
    assert features["token_ids"].dtype == np.int32


def test_pairs_truncate_longest_first_as_bert(vocab_file):
    preprocessor = TextPreprocessor(vocab_file, max_seq_length=8)
    first = tf.constant(["the film was a delight", "the film was a delight"])
    second = tf.constant(["dull", "it is not very good"])
    features = _numpy(preprocessor((first, second)))
    # Budget 8 - 3 = 5 pieces: 5 + 1 trims the longer (first) segment to 4; 5 + 5 keeps
    # 3 of the first and 2 of the second (google-research/bert's _truncate_seq_pair).
    assert features["token_ids"].tolist() == [
        tiny_ids("[CLS]", "the", "film", "was", "a", "[SEP]", "dull", "[SEP]"),
        tiny_ids("[CLS]", "the", "film", "was", "[SEP]", "it", "is", "[SEP]")]
    assert features["segment_ids"].tolist() == [[0] * 6 + [1] * 2, [0] * 5 + [1] * 3]
    assert features["padding_mask"].tolist() == [[1] * 8] * 2


def test_every_accepted_input_form_gives_the_same_ids(preprocessor):
    texts = ["The film was a delight.", "dull"]
    expected = _numpy(preprocessor(tf.constant(texts)))
    forms = {"list": texts, "numpy": np.array(texts), "column": tf.constant([[t] for t in texts])}
    for name, form in forms.items():
        for key, value in _numpy(preprocessor(form)).items():
            assert value.tolist() == expected[key].tolist(), (name, key)
    single = _numpy(preprocessor("dull"))  # one text: one row, no batch axis
    assert single["token_ids"].tolist() == expected["token_ids"][1].tolist()


def test_it_maps_over_a_tf_data_pipeline_of_raw_text(preprocessor):
    texts = ["The film was a delight.", "dull", "too long"]
    expected = _numpy(preprocessor(texts))
    labels = [1, 0, 0]
    data = tf.data.Dataset.from_tensor_slices(({"text": texts}, labels)).batch(2)
    mapped = data.map(lambda x, y: (preprocessor(x["text"]), y))  # as docs/keras.md says
    batches = list(mapped)
    rows = np.concatenate([np.asarray(x["token_ids"]) for x, _ in batches])
    assert rows.tolist() == expected["token_ids"].tolist()
    assert np.concatenate([y.numpy() for _, y in batches]).tolist() == labels


def test_pad_to_multiple_cuts_a_batch_to_its_longest_text(vocab_file, preprocessor):
    short = TextPreprocessor(vocab_file, max_seq_length=10, pad_to_multiple=4)
    cut = _numpy(short(["dull", "too long"]))
    assert cut["token_ids"].shape == (2, 4)
    full = _numpy(preprocessor(["dull", "too long"]))
    assert cut["token_ids"].tolist() == full["token_ids"][:, :4].tolist()
    assert full["padding_mask"][:, 4:].sum() == 0


def test_functional_inputs_give_the_output_structure_without_running(preprocessor):
    text = keras.Input(shape=(), dtype="string")
    pair = keras.Input(shape=(1,), dtype="string")
    outputs = preprocessor((text, pair))
    assert {key: (value.shape, value.dtype) for key, value in outputs.items()} == {
        key: ((None, 10), "int32") for key in KEYS}


def test_the_config_holds_no_path(preprocessor):
    config = preprocessor.get_config()
    assert config["vocab_file"] is None
    assert (config["lower_case"], config["max_seq_length"], config["pad_to_multiple"]) == (
        True, 10, None)
    empty = TextPreprocessor.from_config(config)
    assert not empty.has_vocabulary and preprocessor.has_vocabulary


# --- one clear error per mistake -------------------------------------------------------


def _one_line(error):
    message = str(error.value)
    assert "\n" not in message, message
    return message


def test_a_missing_vocab_file_is_named(tmp_path):
    missing = os.path.join(tmp_path, "no_such_vocab.txt")
    with pytest.raises(FileNotFoundError) as error:
        TextPreprocessor(missing)
    assert _one_line(error) == f"vocab file not found: {missing}"


def test_a_vocab_without_a_special_token_is_named(tmp_path):
    path = write_tiny_vocab(tmp_path, tokens=[t for t in TINY_VOCAB if t != "[MASK]"])
    with pytest.raises(ValueError) as error:
        TextPreprocessor(path)
    assert _one_line(error) == f"vocab file {path} lacks special token(s) [MASK]"


@pytest.mark.parametrize("bad, got", [
    (tf.constant([1, 2]), "got a tensor of dtype int32"),
    (np.array([0.5]), "got a tensor of dtype float64"),
    (tf.ragged.constant([["a"], ["b", "c"]]), "got a RaggedTensor"),
], ids=["int32", "float", "ragged"])
def test_input_that_is_not_strings_says_what_was_expected(preprocessor, bad, got):
    with pytest.raises(TypeError) as error:
        preprocessor(bad)
    message = _one_line(error)
    assert message.startswith("TextPreprocessor 'text_preprocessor' takes strings: a string "
                              "batch [batch] (or [batch, 1]), or a tuple of two for text pairs;")
    assert message.endswith(got)


def test_a_non_string_keras_input_fails_when_the_model_is_built(preprocessor):
    with pytest.raises(TypeError, match="takes strings: .* got a tensor of dtype int32$"):
        preprocessor(keras.Input(shape=(), dtype="int32"))


def test_three_texts_or_a_vocabulary_less_layer_are_refused(preprocessor):
    texts = tf.constant(["dull"])
    with pytest.raises(ValueError) as error:
        preprocessor((texts, texts, texts))
    assert _one_line(error).endswith("takes one text or a pair of texts (a tuple of two string "
                                     "batches), got 3 inputs")
    empty = TextPreprocessor(name="empty")
    with pytest.raises(ValueError) as error:
        empty(texts)
    assert _one_line(error) == ("TextPreprocessor 'empty' has no vocabulary: build it with "
                                "vocab_file=..., or load it with the .keras file it was saved in")
    with pytest.raises(ValueError, match="max_seq_length must be >= 2 for \\[CLS\\] and \\[SEP\\]"):
        TextPreprocessor(max_seq_length=1)
