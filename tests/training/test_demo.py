"""The README's main job, shortened: gensim's Wikipedia excerpt to a trained tiny BERT."""

import hashlib
import os
import subprocess
import sys

import pytest

from bert_tf import demo

from conftest import REPO, train_env

pytestmark = pytest.mark.slow


def test_the_demo_corpus_is_gensims_copy_of_the_shared_excerpt(shared_file):
    def digest(path):
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()

    assert digest(demo.gensim_dump_path()) == digest(shared_file("corpus", demo.DUMP_NAME))


def test_demo_builds_corpus_and_vocab_then_trains(tmp_path):
    model_dir = tmp_path / "demo"
    command = [sys.executable, "-m", "bert_tf.demo", "--model_dir", str(model_dir),
               "--set", "trainer.train_steps=40", "--set", "trainer.steps_per_loop=20",
               "--set", "trainer.eval_every=0", "--set", "trainer.eval_steps=2"]
    result = subprocess.run(command, cwd=REPO, env=train_env(), capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    corpus = model_dir / "corpus"
    with open(corpus / "vocab.txt", encoding="utf-8") as f:
        vocab = f.read().splitlines()
    assert len(vocab) == 8000 and vocab[:1] == ["[PAD]"]
    with open(corpus / "wiki.txt", encoding="utf-8") as f:
        documents = f.read().split("\n\n")
    assert len(documents) == 105  # the excerpt's articles (see tests/data/test_wikipedia.py)
    assert os.path.exists(model_dir / "ckpt-40.index")
    assert os.listdir(model_dir / "train") and os.listdir(model_dir / "eval")
    assert f"TensorBoard: tensorboard --logdir {model_dir}" in result.stdout
