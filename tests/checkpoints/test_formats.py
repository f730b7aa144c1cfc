"""The checkpoint-format registry: its order, its errors, and a new format plugged in."""

import json
import os

import numpy as np
import pytest

from bert_tf import convert
from bert_tf.checkpoints import formats, loading, weight_map
from bert_tf.models import BertEncoder
from bert_tf.models.encoder_config import EncoderConfig
from tests.helpers import TINY

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


class NpzFormat(formats.WeightsFormat):
    """A toy format: `toy_config.json` plus every weight in one `weights.npz`."""

    name = "toy_npz"

    def detect(self, path):
        return os.path.isfile(os.path.join(path, "toy_config.json"))

    def read_config(self, path, hidden_act):
        with open(os.path.join(path, "toy_config.json")) as f:
            return EncoderConfig.from_dict(json.load(f)), True

    def read_arrays(self, path, slots):
        with np.load(os.path.join(path, "weights.npz")) as stored:
            return {slot.name: stored[slot.name] for slot in slots if slot.name in stored}

    def save(self, model, directory, vocab_file=None, lower_case=None, tokenizer_contract=None,
             task_record=None):
        os.makedirs(directory, exist_ok=True)
        encoder = getattr(model, "encoder", model)
        with open(os.path.join(directory, "toy_config.json"), "w") as f:
            json.dump(encoder.encoder_config.to_dict(), f)
        np.savez(os.path.join(directory, "weights.npz"),
                 **{slot.name: slot.variable.numpy() for slot in weight_map.model_slots(model)})
        if vocab_file:
            with open(vocab_file) as src, open(os.path.join(directory, "vocab.txt"), "w") as dst:
                dst.write(src.read())
        return directory


@pytest.fixture
def toy_format():
    fmt = formats.register_format(NpzFormat())
    yield fmt
    del formats.FORMATS[fmt.name]


def _vocab(tmp_path):
    path = os.path.join(tmp_path, "vocab.txt")
    with open(path, "w") as f:
        f.write("\n".join(SPECIALS + [f"w{i}" for i in range(TINY.vocab_size - 5)]) + "\n")
    return path


def _assert_same_weights(a, b):
    for x, y in zip(weight_map.encoder_slots(a), weight_map.encoder_slots(b), strict=True):
        np.testing.assert_array_equal(x.variable.numpy(), y.variable.numpy(), err_msg=x.name)


def test_registry_order_is_the_detection_order():
    assert tuple(formats.FORMATS) == ("bert_tf", "keras", "hf", "google", "garden", "kerashub")
    assert formats.writable_formats() == ["bert_tf", "hf", "google", "garden", "kerashub"]
    assert all(name == fmt.name for name, fmt in formats.FORMATS.items())


def test_unknown_and_read_only_formats_name_the_known_ones(tmp_path):
    with pytest.raises(ValueError, match=r"unknown checkpoint format 'nope'; expected one of "
                                         r"\('bert_tf', 'keras', 'hf', 'google', 'garden', "
                                         r"'kerashub'\)"):
        loading.load_encoder(str(tmp_path), format="nope")
    encoder = BertEncoder.from_encoder_config(TINY)
    with pytest.raises(ValueError, match="cannot write format 'keras'; expected "
                                         "bert_tf, hf, google, garden or kerashub"):
        loading.save(encoder, str(tmp_path / "out"), format="keras")
    with pytest.raises(ValueError, match="a .keras file; load it"):
        loading.describe(str(tmp_path / "model.keras"), format="keras")


def test_an_unrecognised_path_lists_what_each_format_looks_for(tmp_path, toy_format):
    (tmp_path / "model.weights.h5").write_bytes(b"")  # no format's files
    with pytest.raises(ValueError) as raised:
        loading.load_encoder(str(tmp_path))
    prefix = f"{tmp_path}: not a recognised checkpoint; looked for "
    message = str(raised.value)
    assert message.startswith(prefix) and "\n" not in message
    assert message[len(prefix):].split("; ") == [
        "bert_tf (bert_tf_model.json, or a run's ckpt-N)",
        "keras (a .keras file)",
        "hf (config.json with model.safetensors, sharded safetensors or pytorch_model.bin, "
        "or the weights file)",
        "google (a TF checkpoint of bert/... variables, with bert_config.json)",
        "garden (a TF checkpoint of encoder/... variables)",
        "kerashub (KerasHub's config.json, model.weights.h5 and assets/tokenizer/vocabulary.txt)",
        "toy_npz",  # a registered format that does not say what it looks for
    ]


def test_register_refuses_duplicates_and_non_formats(toy_format):
    with pytest.raises(ValueError, match="'toy_npz' is registered already"):
        formats.register_format(NpzFormat())
    with pytest.raises(TypeError, match="expected a CheckpointFormat, got str"):
        formats.register_format("toy")


def test_a_registered_format_loads_describes_and_converts(tmp_path, toy_format, capsys):
    encoder = BertEncoder.from_encoder_config(TINY)
    vocab = _vocab(tmp_path)
    toy = str(tmp_path / "toy")
    loading.save(encoder, toy, format="toy_npz", vocab_file=vocab)
    assert loading.detect_format(toy) == "toy_npz"
    info = loading.describe(toy)
    assert (info.format, info.encoder_config) == ("toy_npz", TINY)
    assert info.vocab_file == os.path.join(toy, "vocab.txt")
    assert info.tokenizer_contract["lower_case"] is True  # read_config's casing
    _assert_same_weights(encoder, loading.load_encoder(toy, vocab_file=vocab))
    result = loading.load(toy, "pretrainer")
    assert result.format == "toy_npz"
    heads = {s.name for s in weight_map.model_slots(result.model)} - {
        s.name for s in weight_map.encoder_slots(result.model.encoder)}
    assert heads and result.initialised == sorted(heads)  # the toy file has no heads

    # The converter reads the same registry: from the toy format and back to it.
    native_dir, back = str(tmp_path / "native"), str(tmp_path / "back")
    assert convert.main(["--from", "toy_npz", "--input", toy, "--output", native_dir]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["input_format"], report["output_format"]) == ("toy_npz", "bert_tf")
    assert loading.detect_format(native_dir) == "bert_tf"
    assert convert.main(["--input", native_dir, "--to", "toy_npz", "--output", back]) == 0
    assert loading.detect_format(back) == "toy_npz"
    _assert_same_weights(encoder, loading.load_encoder(back))


def test_unregistered_format_is_not_offered(tmp_path):
    with pytest.raises(SystemExit):
        convert.parse_args(["--from", "toy_npz", "--input", str(tmp_path),
                            "--output", str(tmp_path)])
