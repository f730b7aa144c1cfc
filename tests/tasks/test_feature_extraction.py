"""`python -m bert_tf.extract_features`: features equal the encoder's layers, keyed by the text."""

import json

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import extract_features
from bert_tf.checkpoints import loading
from bert_tf.tasks.feature_extraction import FeatureExtractor, parse_layers
from bert_tf.text.segment_packer import SegmentPacker
from bert_tf.text.tokenizer import BertTokenizer


@pytest.fixture(scope="module")
def encoder_and_tokenizer(tiny_checkpoint):
    encoder = loading.load_encoder(tiny_checkpoint)
    return encoder, BertTokenizer(f"{tiny_checkpoint}/vocab.txt", lower_case=True)


def _layers_of(encoder, tokenizer, texts, max_seq_length=32):
    packed = SegmentPacker.from_tokenizer(tokenizer, max_seq_length)(
        [tokenizer.tokenize(tf.constant([t])) for t in texts])
    return [layer.numpy()[0] for layer in encoder(packed, training=False)["encoder_outputs"]]


def test_word_rows_hold_the_first_piece_of_each_word(encoder_and_tokenizer):
    encoder, tokenizer = encoder_and_tokenizer
    text = "Huckleberry Finn's raft"
    features = FeatureExtractor(encoder, tokenizer, [-1, -2], "concat", "word", 32).extract(
        [text])
    assert features.token == ["Huckleberry", "Finn's", "raft"]
    assert features.start_char.tolist() == [0, 12, 19]
    assert features.end_char.tolist() == [11, 18, 23]
    layers = _layers_of(encoder, tokenizer, [text])
    # [CLS] hu ##ckle ##berry finn ' s raft [SEP]: first pieces at 1, 4 and 7.
    expected = np.concatenate([layers[-1][[1, 4, 7]], layers[-2][[1, 4, 7]]], axis=-1)
    np.testing.assert_allclose(features.features, expected, atol=1e-6)


def test_wordpiece_rows_and_pairs(encoder_and_tokenizer):
    encoder, tokenizer = encoder_and_tokenizer
    extractor = FeatureExtractor(encoder, tokenizer, [0], "sum", "wordpiece", 32)
    features = extractor.extract(["naïve cat ||| a dog", "solo"])
    assert features.token == ["naive", "cat", "a", "dog", "solo"]
    assert features.segment.tolist() == [0, 0, 1, 1, 0]
    assert features.line_index.tolist() == [0, 0, 0, 0, 1]
    # Character (not byte) offsets: "ï" is two bytes.
    assert features.start_char.tolist() == [0, 6, 0, 2, 0]
    assert features.end_char.tolist() == [5, 9, 1, 5, 4]
    layers = _layers_of(encoder, tokenizer, ["naïve cat", "a dog"])
    # [CLS] naive cat [SEP] a dog [SEP]
    np.testing.assert_allclose(features.features[:4], layers[0][[1, 2, 4, 5]], atol=1e-6)


def test_truncated_lines_are_counted(encoder_and_tokenizer):
    encoder, tokenizer = encoder_and_tokenizer
    extractor = FeatureExtractor(encoder, tokenizer, [-1], "mean", "word", 5)
    features = extractor.extract(["one two three four five"])
    assert features.token == ["one", "two", "three"]
    assert extractor.truncated_lines == 1


def test_layer_spec_is_checked():
    assert parse_layers("-1,-2,0", 4) == [-1, -2, 0]
    with pytest.raises(ValueError, match="layer 4 does not exist; the encoder has 4 layers"):
        parse_layers("4", 4)
    with pytest.raises(ValueError, match="comma-separated integers"):
        parse_layers("last", 4)


def test_command_writes_jsonl_and_npz(tiny_checkpoint, tmp_path, capsys):
    lines = tmp_path / "lines.txt"
    lines.write_text("The cat sat.\nIt was happy. ||| So was I.\n", encoding="utf-8")
    out = tmp_path / "features.jsonl"
    assert extract_features.main(["--init_checkpoint", tiny_checkpoint, "--input_file",
                                  str(lines), "--output_file", str(out),
                                  "--layers=-1,-2"]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["line_index"] for r in records] == [0, 1]
    assert [t["token"] for t in records[1]["tokens"]] == ["It", "was", "happy.", "So", "was",
                                                          "I."]
    assert len(records[0]["tokens"][0]["features"]) == 2 * 32  # two layers, hidden 32
    npz = tmp_path / "features.npz"
    assert extract_features.main(["--init_checkpoint", tiny_checkpoint, "--input_file",
                                  str(lines), "--output_file", str(npz), "--layers=-1"]) == 0
    arrays = np.load(npz)
    assert arrays["features"].shape == (9, 32)
    assert arrays["token"].tolist()[:3] == ["The", "cat", "sat."]


def test_invalid_utf8_names_the_line(tiny_checkpoint, tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine\nbroken \xff here\n")
    code = extract_features.main(["--init_checkpoint", tiny_checkpoint, "--input_file",
                                  str(bad), "--output_file", str(tmp_path / "f.jsonl")])
    assert code == 2
    assert f"{bad}:2: invalid UTF-8" in capsys.readouterr().err
    assert not (tmp_path / "f.jsonl").exists()
