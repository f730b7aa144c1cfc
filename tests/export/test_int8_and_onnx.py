"""The int8 SavedModel export and the ONNX export (fp32 and int8) of a tiny classifier."""

import json
import logging
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints import native
from bert_tf.export import graph_ops, op_allowlist
from bert_tf.export.__main__ import main as export_main
from bert_tf.layers.inference_projections import Int8Projection, inference_projections
from tests.export.export_helpers import TASKS, build_model

PAIRS = (["The cat sat on the mat.", "Stocks fell sharply on Monday.", "A b c", "ok"],
         ["A cat was sitting on a mat.", "Markets dropped.", "x", "fine, thanks"])


def test_int8_projection_is_close_to_the_float_matmul_for_signed_inputs():
    rng = np.random.default_rng(0)
    kernel = rng.normal(0, 0.05, (64, 48)).astype(np.float32)
    bias = rng.normal(0, 1, 48).astype(np.float32)
    # Mostly negative inputs: the asymmetric case the shift through the bias handles.
    inputs = rng.normal(-2, 1, (10, 64)).astype(np.float32)
    expected = inputs @ kernel + bias
    got = Int8Projection(kernel, bias)(tf.constant(inputs)).numpy()
    error = np.abs(got - expected).max() / np.abs(expected).max()
    assert error < 0.02, error
    # Constant inputs (a zero range) stay finite and exact enough.
    flat = Int8Projection(kernel, bias)(tf.ones((2, 64))).numpy()
    assert np.abs(flat - (np.ones((2, 64)) @ kernel + bias)).max() < 0.02


def test_int8_columns_keep_their_precision_whatever_the_other_columns_scale():
    # A fused query|key|value kernel: a third of the columns 20x smaller than the rest.
    # With one scale per kernel they would get 3 of int8's 8 bits (errors near 20 %).
    rng = np.random.default_rng(1)
    column_size = np.r_[np.full(16, 0.05), np.full(32, 1.0)].astype(np.float32)
    kernel = (rng.normal(0, 1, (64, 48)) * column_size).astype(np.float32)
    inputs = rng.normal(0.3, 1, (20, 64)).astype(np.float32)
    expected = inputs @ kernel
    got = Int8Projection(kernel)(tf.constant(inputs)).numpy()
    small = slice(0, 16)
    error = np.abs(got[:, small] - expected[:, small]).max() / np.abs(expected[:, small]).max()
    assert error < 0.03, error


@pytest.fixture(scope="module")
def classifier_dir(tmp_path_factory, tokenizer, vocab_file):
    """A tiny MRPC-style classifier saved as a bert_tf model directory."""
    directory = tmp_path_factory.mktemp("classifier_run")
    record = TASKS["classifier"]
    model = build_model("classifier", record, seed=7)
    native.save(model, str(directory), tokenizer.tokenizer_contract(), vocab_file, record)
    return str(directory), model


@pytest.fixture(scope="module")
def saved_exports(classifier_dir, tmp_path_factory):
    """EXPORTS with fp32/1 and int8/1: the classifier through the command line."""
    model_dir, _ = classifier_dir
    base = str(tmp_path_factory.mktemp("saved_exports"))
    assert export_main(["--model_dir", model_dir, "--export_dir", base + "/fp32"]) == 0
    assert export_main(["--model_dir", model_dir, "--export_dir", base + "/int8",
                        "--quantize", "int8"]) == 0
    return base


def _packed(tokenizer, record, segments=PAIRS):
    from bert_tf.export.serving_module import SERVING_PAD_MULTIPLE
    from bert_tf.export.text_inputs import pack_texts
    from bert_tf.text.segment_packer import SegmentPacker

    packer = SegmentPacker.from_tokenizer(tokenizer, record.max_seq_length,
                                          pad_to_multiple=SERVING_PAD_MULTIPLE)
    packed = pack_texts(tokenizer, packer, [tf.constant(segment) for segment in segments])
    return {"input_word_ids": packed["token_ids"].numpy(),
            "input_mask": packed["padding_mask"].numpy(),
            "input_type_ids": packed["segment_ids"].numpy()}


def test_int8_saved_model_serves_in_a_fresh_process_close_to_float(classifier_dir,
                                                                   saved_exports):
    _, model = classifier_dir
    base = saved_exports
    int8_path = os.path.join(base, "int8", "1")
    ops = graph_ops.saved_model_ops(int8_path)
    # Every projection of both blocks, in each of the three signatures.
    assert ops.get("QuantizedMatMul") == 3 * 2 * 4, ops
    assert not set(ops) & op_allowlist.ONEDNN_ONLY_OPS, ops
    op_allowlist.check_ops(ops, source=int8_path)
    with open(os.path.join(int8_path, "assets.extra", "bert_tf_export.json")) as f:
        assert json.load(f)["quantization"] == "int8"

    # TF's own loader in a process that imports only tensorflow and tensorflow_text.
    script = (
        "import json, sys\nimport tensorflow as tf, tensorflow_text\n"
        "out = {}\n"
        "for name in ('fp32', 'int8'):\n"
        "    f = tf.saved_model.load(sys.argv[1] + '/' + name + '/1').signatures"
        "['serving_default']\n"
        "    r = f(text=tf.constant(json.loads(sys.argv[2])), "
        "text_pair=tf.constant(json.loads(sys.argv[3])))\n"
        "    out[name] = r['probabilities'].numpy().tolist()\n"
        "print(json.dumps(out))\n")
    done = subprocess.run([sys.executable, "-c", script, base, json.dumps(PAIRS[0]),
                           json.dumps(PAIRS[1])], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert done.returncode == 0, done.stderr[-2000:]
    served = json.loads(done.stdout.strip().splitlines()[-1])
    fp32, int8 = np.array(served["fp32"]), np.array(served["int8"])
    assert fp32.shape == int8.shape == (4, 2)
    difference = np.abs(fp32 - int8).max()
    assert 0 < difference < 0.02, difference  # quantized, and close

    # The model itself is float again after the export.
    features = {"token_ids": tf.constant([[101, 2023, 102, 0]]),
                "segment_ids": tf.zeros((1, 4), tf.int32),
                "padding_mask": tf.constant([[1, 1, 1, 0]])}
    before = model(features, training=False)["logits"].numpy()
    with inference_projections(model.encoder, "int8", max_seq_length=4):
        quantized = model(features, training=False)["logits"].numpy()
    after = model(features, training=False)["logits"].numpy()
    np.testing.assert_array_equal(before, after)
    assert not np.array_equal(before, quantized)


def test_onnx_export_matches_the_saved_model_and_says_how_to_tokenize(
        classifier_dir, saved_exports, tokenizer, tmp_path, capfd, caplog):
    import onnxruntime as ort

    from bert_tf.export.onnx_inputs import check_token_ids, read_metadata

    model_dir, _ = classifier_dir
    base = str(tmp_path / "exports")
    capfd.readouterr()
    with caplog.at_level(logging.DEBUG):
        assert export_main(["--model_dir", model_dir, "--export_dir", base + "/onnx",
                            "--format", "onnx"]) == 0
        assert export_main(["--model_dir", model_dir, "--export_dir", base + "/onnx_int8",
                            "--format", "onnx", "--quantize", "int8"]) == 0
    # Only our own lines: none of tf2onnx's, ONNX Runtime's or the graph optimiser's.
    printed = capfd.readouterr()
    assert printed.err == "", printed.err[-2000:]
    assert printed.out.split() == [base + "/onnx/1", base + "/onnx_int8/1"]
    messages = [record.getMessage() for record in caplog.records]
    assert len(messages) == 2, messages[:5]
    assert all(message.startswith("exporting the weights of") for message in messages)
    record = TASKS["classifier"]
    feed = _packed(tokenizer, record)
    signature = tf.saved_model.load(saved_exports + "/fp32/1").signatures["serve_token_ids"]
    expected = {k: v.numpy() for k, v in signature(**{k: tf.constant(v)
                                                      for k, v in feed.items()}).items()}
    outputs = {}
    for name in ("onnx", "onnx_int8"):
        directory = os.path.join(base, name, "1")
        assert sorted(os.listdir(directory)) == ["bert_tf_onnx.json", "model.onnx", "vocab.txt"]
        metadata = read_metadata(directory)
        check_token_ids(feed, metadata)
        session = ort.InferenceSession(os.path.join(directory, "model.onnx"),
                                       providers=["CPUExecutionProvider"])
        names = [output.name for output in session.get_outputs()]
        assert sorted(names) == metadata["outputs"] == ["label_id", "logits", "probabilities"]
        outputs[name] = dict(zip(names, session.run(None, feed), strict=True))
    np.testing.assert_allclose(outputs["onnx"]["logits"], expected["logits"], atol=1e-5)
    np.testing.assert_array_equal(outputs["onnx"]["label_id"], expected["label_id"])
    int8_error = np.abs(outputs["onnx_int8"]["probabilities"] - expected["probabilities"]).max()
    assert 0 < int8_error < 0.02, int8_error

    metadata = read_metadata(os.path.join(base, "onnx", "1"))
    assert metadata["label_names"] == list(record.label_names)
    assert metadata["tokenizer"]["lower_case"] is True
    assert metadata["tokenizer"]["max_seq_length"] == record.max_seq_length
    assert metadata["tokenizer"]["special_token_ids"]["[CLS]"] == 101
    assert metadata["quantization"] is None
    assert read_metadata(os.path.join(base, "onnx_int8", "1"))["quantization"] == "int8"
    _check_the_docs_client(os.path.join(base, "onnx", "1"), tokenizer, record)


DOCS = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "export-and-serving.md")


def _check_the_docs_client(export, tokenizer, record):
    """The docs' ONNX Runtime client, pasted as it is, answers as the ONNX model does."""
    import re

    import onnxruntime as ort

    with open(DOCS, encoding="utf-8") as f:
        page = f.read()
    section = page[page.index("### An ONNX Runtime client"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    texts = json.loads(re.search(r"^texts = (\[.*?\])", code, re.M).group(1))
    code = code.replace('EXPORT = "exports/sst2_onnx/1"', f"EXPORT = {export!r}")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    assert [line.split(" ", 1)[0] for line in lines] and len(lines) == len(texts)
    # Our tokenizer's ids through the same model: the same labels and probabilities.
    feed = _packed(tokenizer, record, [texts])
    session = ort.InferenceSession(os.path.join(export, "model.onnx"),
                                   providers=["CPUExecutionProvider"])
    probabilities = session.run(["probabilities"], feed)[0]
    for line, text, expected in zip(lines, texts, probabilities, strict=True):
        label, numbers = line.split(" ", 1)
        assert label == record.label_names[int(expected.argmax())]
        printed = [float(x) for x in re.findall(r"\d\.\d+", numbers.split("]")[0])]
        np.testing.assert_allclose(printed, expected, atol=1e-3)
        assert line.endswith(text)


@pytest.mark.parametrize("change, message", [
    ({"input_word_ids": -1}, r"input_word_ids: values must be in \[0, 30521\]"),
    ({"input_type_ids": 7}, r"input_type_ids: values must be in \[0, 1\]"),
    ({"input_mask": 2}, r"input_mask: values must be in \[0, 1\]"),
])
def test_onnx_client_check_names_the_bad_input(change, message):
    from bert_tf.export.onnx_inputs import check_token_ids

    metadata = {"inputs": {"shape": ["batch", "sequence"], "dtype": "int32",
                           "input_word_ids": {"min": 0, "max": 30521},
                           "input_type_ids": {"min": 0, "max": 1},
                           "input_mask": {"min": 0, "max": 1}, "max_sequence_length": 64}}
    feed = {"input_word_ids": np.full((2, 8), 5, np.int32),
            "input_mask": np.ones((2, 8), np.int32), "input_type_ids": np.zeros((2, 8), np.int32)}
    check_token_ids(feed, metadata)
    # numpy's default integers are int64: ONNX Runtime would refuse them without a name.
    with pytest.raises(ValueError, match=r"input_word_ids: expected int32 integers, got int64"):
        check_token_ids({**feed, "input_word_ids": np.full((2, 8), 5)}, metadata)
    with pytest.raises(ValueError, match="input_mask: expected rank 2"):
        check_token_ids({**feed, "input_mask": np.ones(8, np.int32)}, metadata)
    (name, value), = change.items()
    bad = feed[name].copy()
    bad[1, 3] = value
    with pytest.raises(ValueError, match=message):
        check_token_ids({**feed, name: bad}, metadata)
