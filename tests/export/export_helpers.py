"""Tiny task models and task records shared by the export tests, and the fresh-process
serving-contract run."""

import json
import os
import subprocess
import sys

from bert_tf.checkpoints.task_record import TaskRecord
from bert_tf.export import op_allowlist

HERE = os.path.dirname(os.path.abspath(__file__))

TASKS = {
    "classifier": TaskRecord(kind="classifier", name="mrpc", max_seq_length=32,
                             label_names=("not_equivalent", "equivalent"), text_inputs=2),
    "regressor": TaskRecord(kind="regressor", name="stsb", max_seq_length=24, text_inputs=1),
    "span_labeler": TaskRecord(kind="span_labeler", name="squad", max_seq_length=48,
                               version_2_with_negative=True, max_answer_length=8,
                               max_query_length=12),
    "token_classifier": TaskRecord(kind="token_classifier", name="ner", max_seq_length=16,
                                   label_names=("O", "B-PER", "I-PER", "B-LOC", "I-LOC")),
    "multiple_choice": TaskRecord(kind="multiple_choice", name="swag", max_seq_length=24,
                                  num_choices=3),
    "encoder": TaskRecord(kind="encoder", name="features", max_seq_length=20),
}


def tiny_config():
    """A tiny encoder config over the real uncased vocab."""
    from bert_tf.models.encoder_config import EncoderConfig

    return EncoderConfig(vocab_size=30522, hidden_size=32, num_layers=2, num_heads=4,
                         intermediate_size=64, max_position_embeddings=64)


def build_model(kind, record, seed=0):
    """A freshly initialised tiny model of a task kind."""
    import keras

    from bert_tf import models

    keras.utils.set_random_seed(seed)
    encoder = models.BertEncoder.from_encoder_config(tiny_config())
    if kind in ("classifier", "regressor"):
        return models.BertClassifier(
            encoder, 1 if kind == "regressor" else len(record.label_names))
    if kind == "span_labeler":
        return models.BertSpanLabeler(encoder)
    if kind == "token_classifier":
        return models.BertTokenClassifier(encoder, len(record.label_names))
    if kind == "multiple_choice":
        return models.BertMultipleChoice(encoder, record.num_choices)
    if kind == "pretrainer":
        return models.BertPretrainer(encoder)
    return encoder


def run_serving_contract(paths, request_dir, onednn=None, timeout=900):
    """The JSON summary `serving_contract.py` prints for the SavedModels `paths`, checked in a
    fresh process that imports only tensorflow, tensorflow_text and the serving protos.

    Args:
      paths: export version directories.
      request_dir: a directory for the request file.
      onednn: None (TensorFlow's default for this CPU), or True / False for
        TF_ENABLE_ONEDNN_OPTS=1 / 0.
      timeout: seconds.
    """
    request = os.path.join(request_dir, "serving_contract_request.json")
    with open(request, "w", encoding="utf-8") as f:
        json.dump({"exports": [str(path) for path in paths],
                   "python_ops": sorted(op_allowlist.PYTHON_ONLY_OPS)}, f)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("TF_ENABLE_ONEDNN_OPTS", None)
    if onednn is not None:
        env["TF_ENABLE_ONEDNN_OPTS"] = "1" if onednn else "0"
    run = subprocess.run([sys.executable, os.path.join(HERE, "serving_contract.py"), request],
                         capture_output=True, text=True, env=env, timeout=timeout)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


INT8_SERVING_SCRIPT = os.path.join(os.path.dirname(__file__), "int8_fresh_process.py")


def serve_both_onednn_ways(request_path, timeout=600):
    """`int8_fresh_process.py` on `request_path` in two fresh processes, oneDNN's rewrite
    off and on; returns {"0": answers, "1": answers} (TF_ENABLE_ONEDNN_OPTS)."""
    answers = {}
    for setting in ("0", "1"):
        done = subprocess.run(
            [sys.executable, INT8_SERVING_SCRIPT, str(request_path)], capture_output=True,
            text=True, timeout=timeout, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2",
                                             "TF_ENABLE_ONEDNN_OPTS": setting})
        assert done.returncode == 0, f"TF_ENABLE_ONEDNN_OPTS={setting}: {done.stderr[-3000:]}"
        answers[setting] = json.loads(done.stdout.strip().splitlines()[-1])
    return answers
