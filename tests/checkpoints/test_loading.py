"""`load_encoder`: format detection, tokenizer contracts, converter CLI, bad input."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import bert_tf
from bert_tf.checkpoints import hugging_face, loading, native, weight_map
from bert_tf.models import BertClassifier, BertEncoder
from bert_tf.text.tokenizer_contract import TokenizerContractError, contract_from_vocab
from tests.helpers import TINY, max_abs_diff, random_inputs

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _vocab(tmp_path, name="vocab.txt", extra="word"):
    path = os.path.join(tmp_path, name)
    tokens = SPECIALS + [f"{extra}{i}" for i in range(TINY.vocab_size - len(SPECIALS))]
    with open(path, "w") as f:
        f.write("\n".join(tokens) + "\n")
    return path


@pytest.mark.parametrize("fmt", ["bert_tf", "google", "hf", "garden"])
def test_every_format_round_trips_exactly(tmp_path, fmt):
    encoder = BertEncoder.from_encoder_config(TINY)
    out = os.path.join(tmp_path, fmt)
    loading.save(encoder, out, format=fmt, vocab_file=_vocab(tmp_path), lower_case=True)
    assert loading.detect_format(out) == fmt
    loaded = bert_tf.load_encoder(out, hidden_act="gelu" if fmt == "garden" else None)
    for a, b in zip(weight_map.encoder_slots(encoder), weight_map.encoder_slots(loaded)):
        np.testing.assert_array_equal(a.variable.numpy(), b.variable.numpy(), err_msg=a.name)


def test_hf_export_is_a_valid_hf_layout(tmp_path, minilm_dir):
    encoder = loading.load_encoder(minilm_dir)
    hugging_face.write(encoder, tmp_path)
    from safetensors.numpy import load_file
    ours = load_file(os.path.join(tmp_path, "model.safetensors"))
    theirs = load_file(os.path.join(minilm_dir, "model.safetensors"))
    theirs.pop("embeddings.position_ids")
    assert set(ours) == set(theirs)
    for key in theirs:
        np.testing.assert_array_equal(ours[key], theirs[key], err_msg=key)


def test_keras_file_and_training_dir_layout(tmp_path):
    classifier = BertClassifier(BertEncoder.from_encoder_config(TINY), num_classes=2)
    path = os.path.join(tmp_path, "classifier.keras")
    classifier.save(path)
    encoder = loading.load_encoder(path)
    inputs = random_inputs()
    assert max_abs_diff(encoder(inputs)["pooled_output"],
                        classifier.encoder(inputs)["pooled_output"]) == 0
    # Task models save in the native format with their heads.
    native.save(classifier, os.path.join(tmp_path, "native"))
    metadata = native.read_metadata(os.path.join(tmp_path, "native"))
    assert metadata["model_class"] == "BertClassifier"
    assert metadata["task_args"]["num_classes"] == 2
    names = {s.name for s in weight_map.task_slots(classifier)}
    assert "heads/classification_head/dense/kernel" in names


def test_tokenizer_contract_is_recorded_and_enforced(tmp_path):
    vocab = _vocab(tmp_path)
    encoder = BertEncoder.from_encoder_config(TINY)
    out = os.path.join(tmp_path, "model")
    loading.save(encoder, out, vocab_file=vocab, lower_case=True)
    metadata = native.read_metadata(out)
    assert metadata["tokenizer"] == contract_from_vocab(vocab, lower_case=True)
    assert metadata["tokenizer"]["special_token_ids"]["[CLS]"] == 2
    loading.load_encoder(out, vocab_file=vocab)  # the same vocab is accepted
    other = _vocab(os.path.join(tmp_path, "model"), name="other.txt", extra="piece")
    with pytest.raises(TokenizerContractError, match="vocab sha256 .* different tokens"):
        loading.load_encoder(out, vocab_file=other)
    with pytest.raises(TokenizerContractError, match="lower_case=False but .* lower_case=True"):
        loading.load_encoder(out, vocab_file=vocab, lower_case=False)


def test_wrong_vocab_size_is_refused(tmp_path, shared_file, minilm_dir):
    cased = shared_file("vocab", "bert-base-cased-vocab.txt")
    with pytest.raises(TokenizerContractError, match="28996 .* 30522"):
        loading.load_encoder(minilm_dir, vocab_file=cased)


def test_unrecognised_inputs_fail_clearly(tmp_path):
    with pytest.raises(FileNotFoundError, match="checkpoint not found: .*nowhere"):
        loading.load_encoder(os.path.join(tmp_path, "nowhere"))
    empty = os.path.join(tmp_path, "empty")
    os.makedirs(empty)
    with pytest.raises(ValueError, match="not a recognised checkpoint"):
        loading.load_encoder(empty)
    bad = os.path.join(tmp_path, "broken.safetensors")
    with open(bad, "wb") as f:
        f.write(b"garbage")
    with open(os.path.join(tmp_path, "config.json"), "w") as f:
        json.dump({**TINY.to_bert_config(), "model_type": "bert"}, f)
    with pytest.raises(ValueError, match="broken.safetensors: not a readable safetensors"):
        loading.load_encoder(bad)
    with open(os.path.join(tmp_path, "config.json"), "w") as f:
        json.dump({**TINY.to_bert_config(), "model_type": "roberta"}, f)
    with pytest.raises(ValueError, match="model_type 'roberta' is not a BERT model"):
        loading.load_encoder(bad)


def test_convert_cli_reports_and_writes(tmp_path, minilm_dir):
    out = os.path.join(tmp_path, "converted")
    result = subprocess.run(
        [sys.executable, "-m", "bert_tf.convert", "--from", "hf", "--input", minilm_dir,
         "--to", "google", "--output", out],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["variables_loaded"] == 103
    assert report["parameters"] == 22_713_216
    assert report["tokenizer_contract"]["lower_case"] is True
    assert sorted(os.listdir(out)) == ["bert_config.json", "bert_model.ckpt.data-00000-of-00001",
                                       "bert_model.ckpt.index", "vocab.txt"]
    missing = os.path.join(tmp_path, "missing")
    failed = subprocess.run(
        [sys.executable, "-m", "bert_tf.convert", "--input", missing,
         "--output", out], capture_output=True, text=True, timeout=300)
    assert failed.returncode == 2
    assert failed.stderr.startswith(f"error: --input {missing} does not exist; expected a "
                                    "checkpoint")


def test_malformed_side_files_name_the_file(tmp_path):
    encoder = BertEncoder.from_encoder_config(TINY)
    for fmt, name in (("hf", "config.json"), ("google", "bert_config.json"),
                      ("bert_tf", "bert_tf_model.json")):
        out = os.path.join(tmp_path, fmt)
        loading.save(encoder, out, format=fmt)
        with open(os.path.join(out, name), "w") as f:
            f.write("{not json")
        with pytest.raises(ValueError, match=f"{name}: not valid JSON"):
            loading.load_encoder(out, format=fmt)
    os.remove(os.path.join(tmp_path, "google", "bert_config.json"))
    with pytest.raises(FileNotFoundError,
                       match="bert_config.json not found; a Google BERT checkpoint ships"):
        loading.load_encoder(os.path.join(tmp_path, "google"))
