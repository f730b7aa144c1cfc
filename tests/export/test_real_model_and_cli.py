"""The real MiniLM encoder exported and served from a fresh process, and
TensorFlow's `saved_model_cli` on an export."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints.loading import load_encoder
from bert_tf.checkpoints.task_record import TaskRecord
from bert_tf.export import export_model
from bert_tf.text.segment_packer import SegmentPacker
from bert_tf.text.tokenizer import BertTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")


def _run(args, timeout=600):
    run = subprocess.run(args, capture_output=True, text=True, env=ENV, timeout=timeout)
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout


@pytest.mark.slow
def test_minilm_export_matches_keras_and_reference(minilm_dir, reference_file, tmp_path):
    with open(reference_file("minilm_l6_reference_texts.json"), encoding="utf-8") as f:
        texts = json.load(f)["segment_a"][:16]  # the single SST-2 sentences
    reference = np.load(reference_file("minilm_l6_reference.npz"))
    encoder = load_encoder(minilm_dir)
    tokenizer = BertTokenizer(os.path.join(minilm_dir, "vocab.txt"), lower_case=True)
    info = TaskRecord(kind="encoder", name="all-minilm-l6-v2", max_seq_length=64)
    path = export_model(encoder, tokenizer, str(tmp_path / "minilm"), info)

    request = tmp_path / "request.json"
    request.write_text(json.dumps({"exports": {"encoder": path},
                                   "inputs": {"encoder": {"text": texts}},
                                   "empty": {"encoder": {"text": [0]}}}))
    served = json.loads(_run([sys.executable, os.path.join(HERE, "fresh_process_predict.py"),
                              str(request)]).strip().splitlines()[-1])["encoder"]
    packer = SegmentPacker.from_tokenizer(tokenizer, 64)
    features = packer([tokenizer.tokenize(tf.constant(texts))])
    expected = encoder(features)
    pooled = np.asarray(served["pooled_output"])
    assert np.max(np.abs(pooled - expected["pooled_output"].numpy())) <= 1e-5
    # A request runs at its longest text (rounded up to 8): the real tokens'
    # outputs are the encoder's at max_seq_length; past that length, zeros.
    real = features["padding_mask"].numpy().astype(bool)
    sequence = np.asarray(served["sequence_output"])
    assert sequence.shape == (16, 64, 384)
    assert np.max(np.abs(sequence[real] - expected["sequence_output"].numpy()[real])) <= 1e-5
    run_length = -(-real.sum(axis=1).max() // 8) * 8
    assert run_length < 64 and not sequence[:, run_length:].any()
    # Same ids as the Hugging Face reference, and its outputs within float noise.
    assert np.asarray(served["padding_mask"]).tolist() == reference["input_mask"][:16].tolist()
    assert np.max(np.abs(pooled - reference["pooled_output"][:16])) <= 1e-4


@pytest.mark.slow
@pytest.mark.long
def test_saved_model_cli_show_and_run(exports):
    _, _, path = exports["classifier"]
    shown = _run([sys.executable, "-m", "tensorflow.python.tools.saved_model_cli",
                  "show", "--all", "--dir", path])
    for name in ("serving_default", "encode", "serve_token_ids"):
        assert f"signature_def['{name}']" in shown
    assert "inputs['text_pair'] tensor_info" in shown

    expected = tf.saved_model.load(path).signatures["serving_default"](
        text=tf.constant(["a gorgeous film"]), text_pair=tf.constant(["dull"]))
    ran = _run([sys.executable, "-m", "bert_tf.export.saved_model_cli", "run", "--dir", path,
                "--tag_set", "serve", "--signature_def", "serving_default",
                "--input_exprs", 'text=["a gorgeous film"];text_pair=["dull"]'])
    label = expected["label"].numpy()[0].decode()
    assert f"Result for output key label:\n[b'{label}']" in ran
    assert "Result for output key probabilities:" in ran
