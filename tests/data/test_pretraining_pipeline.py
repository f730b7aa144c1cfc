"""Tests of the dynamic pretraining pipeline (bert_tf.data.pretraining, sentence_pairs)."""

import dataclasses
import functools
import glob
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data import pretraining
from bert_tf.data.sentence_pairs import make_instances
from bert_tf.data.sentence_split import split_sentences
from bert_tf.text.tokenizer import BertTokenizer

CLS, SEP, MASK, PAD = 101, 102, 103, 0


@pytest.fixture
def vocab_file(shared_file):
    return shared_file("vocab", "bert-base-uncased-vocab.txt")


@pytest.fixture
def tokenizer(vocab_file):
    return _tokenizer(vocab_file)


@functools.lru_cache(maxsize=1)
def _tokenizer(vocab_file):
    return BertTokenizer(vocab_file, lower_case=True)


@pytest.fixture
def sotu_corpus(shared_file, tmp_path_factory):
    """The State of the Union speeches in BERT's format: one sentence per line.

    The shared files hold one speech per line; a rule-based splitter cuts them
    into sentences. Returns the folder of the converted files (one speech each).
    """
    source = shared_file("corpus", "sotu")
    target = tmp_path_factory.getbasetemp() / "sotu_sentences"
    if not target.exists():
        target.mkdir()
        for path in sorted(glob.glob(os.path.join(source, "*.txt"))):
            with open(path, encoding="utf-8") as f:
                sentences = split_sentences(f.read())
            if sentences:
                (target / os.path.basename(path)).write_text(
                    "\n".join(sentences) + "\n", encoding="utf-8")
    return str(target)


def _examples(dataset):
    return list(dataset.as_numpy_iterator())


def _stack(examples):
    return {name: np.stack([e[name] for e in examples]) for name in examples[0]}


def _small_dataset(corpus, tokenizer, vocab_file=None, *, batch_size=None, num_epochs=1,
                   start_example=0, input_context=None, **options):
    """The pipeline over the ten speeches of the 1790s, unbatched, seq 64.

    `options` are `PretrainingOptions` fields that replace the small defaults.
    """
    options = pretraining.PretrainingOptions(**{
        "seed": 5, "documents_per_window": 4, "shuffle_buffer_size": 64,
        "max_seq_length": 64, "max_predictions_per_seq": 10, **options})
    return pretraining.pretraining_dataset(
        os.path.join(corpus, "179*.txt"), tokenizer, vocab_file, batch_size=batch_size,
        options=options, num_epochs=num_epochs, start_example=start_example,
        input_context=input_context)


def _small_run(corpus, tokenizer, **kwargs):
    """All examples of `_small_dataset`, computed once per option set.

    Building a pipeline (tracing the tokenizer, pairing and masking graphs)
    takes seconds, iterating it a fraction of that; tests share the runs.
    """
    return _cached_run(corpus, tokenizer, tuple(sorted(kwargs.items())))[1]


@functools.cache
def _cached_run(corpus, tokenizer, options):
    dataset = _small_dataset(corpus, tokenizer, **dict(options))
    return dataset, _examples(dataset)


# --- building blocks --------------------------------------------------------


def test_make_instances_on_literal_documents():
    # Two documents of sentences with distinct token ids (1000 + doc * 100 + k).
    docs = tf.ragged.constant([
        [[1000, 1001], [1002, 1003, 1004], [1005], [1006, 1007]],
        [[1100, 1101, 1102], [1103], [1104, 1105]],
    ], dtype=tf.int32)
    seen_labels = set()
    for seed in range(30):
        out = make_instances(docs, tf.constant([seed, 1]), max_seq_length=9,
                             cls_id=CLS, sep_id=SEP, short_seq_prob=0.0)
        for ids, segments, mask, label in zip(
                out["input_ids"].numpy(), out["segment_ids"].numpy(),
                out["input_mask"].numpy(), out["next_sentence_labels"].numpy()):
            length = mask.sum()
            real = ids[:length].tolist()
            assert real[0] == CLS and real[-1] == SEP and real.count(SEP) == 2
            first_sep = real.index(SEP)
            tokens_a, tokens_b = real[1:first_sep], real[first_sep + 1:-1]
            assert tokens_a and tokens_b
            assert segments[:first_sep + 1].tolist() == [0] * (first_sep + 1)
            assert segments[first_sep + 1:length].tolist() == [1] * (length - first_sep - 1)
            assert ids[length:].tolist() == [PAD] * (9 - length)
            doc_a = (tokens_a[0] - 1000) // 100
            doc_b = (tokens_b[0] - 1000) // 100
            if label == 0:  # IsNext: B continues A in the same document.
                assert doc_a == doc_b and tokens_b[0] > tokens_a[-1]
                if length < 9:  # not truncated: adjacent
                    assert tokens_b[0] == tokens_a[-1] + 1
            else:  # NotNext: B comes from the other document of the window.
                assert doc_a != doc_b
            seen_labels.add(int(label))
    assert seen_labels == {0, 1}


def test_make_instances_skips_empty_sentences_and_documents():
    docs = tf.ragged.constant([[[]], [[1000, 1001], [], [1002]], []], dtype=tf.int32,
                              ragged_rank=2)
    out = make_instances(docs, tf.constant([0, 0]), max_seq_length=16, cls_id=CLS,
                         sep_id=SEP)
    assert out["input_ids"].shape[0] >= 1
    empty = make_instances(docs[:1], tf.constant([0, 0]), max_seq_length=16, cls_id=CLS,
                           sep_id=SEP)
    assert empty["input_ids"].shape == (0, 16)


def test_graph_has_no_python_and_no_stateful_random_ops(sotu_corpus, tokenizer):
    dataset, _ = _cached_run(sotu_corpus, tokenizer, ())
    graph = tf.compat.v1.GraphDef.FromString(dataset._as_serialized_graph().numpy())
    ops = {node.op for node in graph.node}
    for function in graph.library.function:
        ops |= {node.op for node in function.node_def}
    forbidden = {"PyFunc", "PyFuncStateless", "EagerPyFunc", "RandomUniform",
                 "RandomUniformInt", "RandomStandardNormal", "TruncatedNormal",
                 "RandomShuffle", "Multinomial", "RandomGamma", "RandomPoisson"}
    assert not ops & forbidden
    assert "StatelessRandomUniformV2" in ops


# --- features ---------------------------------------------------------------


def test_feature_layout(sotu_corpus, tokenizer):
    examples = _small_run(sotu_corpus, tokenizer)
    assert len(examples) > 100
    batch = _stack(examples)
    assert {name: (v.dtype, v.shape[1:]) for name, v in batch.items()} == {
        "input_ids": (np.int32, (64,)), "input_mask": (np.int32, (64,)),
        "segment_ids": (np.int32, (64,)), "masked_lm_positions": (np.int32, (10,)),
        "masked_lm_ids": (np.int32, (10,)), "masked_lm_weights": (np.float32, (10,)),
        "next_sentence_labels": (np.int32, ())}
    for e in examples:
        length = int(e["input_mask"].sum())
        assert e["input_mask"][:length].all() and not e["input_mask"][length:].any()
        ids = e["input_ids"].copy()
        weights = e["masked_lm_weights"]
        positions = e["masked_lm_positions"][weights > 0]
        assert list(positions) == sorted(set(positions))
        assert positions.min() >= 1 and positions.max() < length - 1
        ids[positions] = e["masked_lm_ids"][weights > 0]  # the original tokens
        real = ids[:length].tolist()
        assert real[0] == CLS and real[-1] == SEP and real.count(SEP) == 2
        assert MASK not in real and PAD not in real
        assert not ids[length:].any() and not e["segment_ids"][length:].any()
        first_sep = real.index(SEP)
        assert first_sep >= 2 and first_sep <= length - 3  # A and B are not empty
        np.testing.assert_array_equal(
            e["segment_ids"][:length], [0] * (first_sep + 1) + [1] * (length - first_sep - 1))
        # round(length * 0.15), at least 1, at most 10 predictions.
        assert weights.sum() == min(10, max(1, round(length * 0.15)))


def _document_streams(files, tokenizer):
    """Each file's token ids as one comma-joined string, for substring search."""
    streams = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            sentences = [line.strip() for line in f if line.strip()]
        ids = tokenizer.tokenize(tf.constant(sentences)).flat_values.numpy()
        streams.append("," + ",".join(map(str, ids)) + ",")
    return streams


def test_pairs_come_from_the_corpus(sotu_corpus, tokenizer):
    files = sorted(glob.glob(os.path.join(sotu_corpus, "179*.txt")))
    streams = _document_streams(files, tokenizer)
    examples = _small_run(sotu_corpus, tokenizer)
    checked = {0: 0, 1: 0}
    for e in examples:
        length = int(e["input_mask"].sum())
        ids = e["input_ids"].copy()
        weights = e["masked_lm_weights"] > 0
        ids[e["masked_lm_positions"][weights]] = e["masked_lm_ids"][weights]
        real = ids[:length].tolist()
        first_sep = real.index(SEP)
        a = "," + ",".join(map(str, real[1:first_sep])) + ","
        b = "," + ",".join(map(str, real[first_sep + 1:-1])) + ","
        docs_a = [i for i, s in enumerate(streams) if a in s]
        docs_b = [i for i, s in enumerate(streams) if b in s]
        assert docs_a and docs_b, "A and B are spans of the corpus"
        label = int(e["next_sentence_labels"])
        if label == 0:  # IsNext: B follows A in A's document
            assert any(a in streams[i] and streams[i].find(b) > streams[i].find(a)
                       for i in docs_a)
            if length < 64:  # not truncated: adjacent
                assert any(a[:-1] + b in streams[i] for i in docs_a)
            checked[0] += 1
        elif len(docs_a) == 1 and len(docs_b) == 1:
            assert docs_a != docs_b  # NotNext: B from another document of the window
            checked[1] += 1
    assert checked[0] > 100 and checked[1] > 100


def test_real_corpus_statistics(sotu_corpus, tokenizer):
    # The 20th-century speeches: about 1.1 M tokens, 9 k sequences.
    dataset = pretraining.pretraining_dataset(
        os.path.join(sotu_corpus, "19*.txt"), tokenizer, batch_size=256,
        options=pretraining.PretrainingOptions(seed=11), drop_remainder=False)
    batches = list(dataset.as_numpy_iterator())
    data = {name: np.concatenate([b[name] for b in batches]) for name in batches[0]}
    tokens = data["input_mask"].sum()
    assert tokens >= 100_000
    assert abs(np.mean(data["next_sentence_labels"] == 0) - 0.5) < 0.02
    weights = data["masked_lm_weights"]
    assert abs(weights.sum() / tokens - 0.15) < 0.005
    rows, cols = np.nonzero(weights)
    now = data["input_ids"][rows, data["masked_lm_positions"][rows, cols]]
    original = data["masked_lm_ids"][rows, cols]
    assert abs(np.mean(now == MASK) - 0.8) < 0.015
    assert abs(np.mean(now == original) - 0.1) < 0.015
    assert abs(np.mean((now != MASK) & (now != original)) - 0.1) < 0.015
    # Most sequences are full; short_seq_prob = 0.1 makes some short ones.
    lengths = data["input_mask"].sum(axis=1)
    assert np.mean(lengths == 128) > 0.8
    assert 0.02 < np.mean(lengths < 100) < 0.15


def test_whole_word_masking_without_nsp(sotu_corpus, tokenizer, vocab_file):
    from bert_tf.text.masking import read_vocab
    continuation = read_vocab(vocab_file).is_continuation
    examples = _small_run(sotu_corpus, tokenizer, whole_word_masking=True, nsp=False)
    assert "next_sentence_labels" not in examples[0]
    whole_words = 0
    lengths = []
    for e in examples:
        ids = e["input_ids"].copy()
        weights = e["masked_lm_weights"] > 0
        positions = e["masked_lm_positions"][weights]
        ids[positions] = e["masked_lm_ids"][weights]
        # Without NSP: [CLS] one segment [SEP], segment ids all 0.
        length = int(e["input_mask"].sum())
        real = ids[:length].tolist()
        assert real[0] == CLS and real[-1] == SEP and real.count(SEP) == 1
        assert not e["segment_ids"].any()
        lengths.append(length)
        chosen = np.zeros(len(ids), bool)
        chosen[positions] = True
        glued = continuation[ids] & (np.roll(ids, 1) != SEP) & (np.roll(ids, 1) != CLS)
        glued[0] = False
        # A "##" piece is chosen exactly when the piece before it is: whole words.
        assert (chosen[glued] == np.roll(chosen, 1)[glued]).all()
        whole_words += int((chosen & glued).any())
    assert whole_words > 10
    assert np.mean(np.array(lengths) == 64) > 0.7


@pytest.mark.parametrize("values, message", [
    ({"documents_per_window": 0}, "documents_per_window must be >= 1, got 0"),
    ({"max_seq_length": 16, "max_predictions_per_seq": 20},
     "max_predictions_per_seq=20 exceeds max_seq_length=16"),
    ({"short_seq_prob": 1.5}, r"short_seq_prob must be in \[0, 1\], got 1.5"),
])
def test_pretraining_options_are_checked_on_construction(values, message):
    with pytest.raises(ValueError, match=message):
        pretraining.PretrainingOptions(**values)


# --- determinism -------------------------------------------------------------


def _assert_same(first, second):
    assert len(first) == len(second)
    for x, y in zip(first, second):
        for name in x:
            np.testing.assert_array_equal(x[name], y[name])


def _positions(examples):
    return np.stack([e["masked_lm_positions"] for e in examples])


def test_resuming_gives_the_tail_of_the_full_run_and_epochs_differ(sotu_corpus, tokenizer):
    # A separately built pipeline, resumed at example 50 of epoch 0 and run
    # into epoch 1, reproduces the uninterrupted epoch 0 exactly (same seed,
    # same batches across constructions); epoch 1 draws fresh pairs and masks.
    epoch_0 = _small_run(sotu_corpus, tokenizer)
    resumed = _examples(_small_dataset(sotu_corpus, tokenizer, start_example=50,
                                       num_epochs=2))
    _assert_same(epoch_0[50:], resumed[:len(epoch_0) - 50])
    epoch_1 = resumed[len(epoch_0) - 50:]
    n = min(len(epoch_0), len(epoch_1))
    assert n > 100
    assert not np.array_equal(_positions(epoch_0[:n]), _positions(epoch_1[:n]))
    assert not np.array_equal(_stack(epoch_0[:n])["next_sentence_labels"],
                              _stack(epoch_1[:n])["next_sentence_labels"])


def test_other_seed_other_masks(sotu_corpus, tokenizer):
    first = _small_run(sotu_corpus, tokenizer)
    other_seed = _examples(_small_dataset(sotu_corpus, tokenizer, seed=6).take(100))
    assert not np.array_equal(_positions(first[:100]), _positions(other_seed))


def test_to_model_inputs_feeds_the_pretrainer(sotu_corpus, tokenizer):
    from bert_tf.models.bert_encoder import BertEncoder
    from bert_tf.models.bert_pretrainer import BertPretrainer
    from bert_tf.models.presets import get_preset

    batch = {name: tf.constant(values[:4])
             for name, values in _stack(_small_run(sotu_corpus, tokenizer)).items()}
    inputs, labels = pretraining.to_model_inputs(batch)
    assert sorted(inputs) == ["masked_lm_positions", "padding_mask", "segment_ids",
                              "token_ids"]
    assert sorted(labels) == ["masked_lm_ids", "masked_lm_weights", "next_sentence_labels"]
    encoder = BertEncoder.from_encoder_config(get_preset("tiny", vocab_size=30522))
    outputs = BertPretrainer(encoder)(inputs)
    assert outputs["mlm_logits"].shape == (4, 10, 30522)
    assert outputs["nsp_logits"].shape == (4, 2)


def test_input_pipelines_get_their_own_shards(sotu_corpus, tokenizer):
    def pipeline(index):
        context = tf.distribute.InputContext(
            num_input_pipelines=2, input_pipeline_id=index, num_replicas_in_sync=2)
        return _examples(_small_dataset(sotu_corpus, tokenizer, batch_size=8,
                                        input_context=context).take(3))

    first, second = pipeline(0), pipeline(1)
    assert first[0]["input_ids"].shape == (4, 64)  # per-replica batch
    assert not np.array_equal(first[0]["input_ids"], second[0]["input_ids"])


def test_clear_errors(sotu_corpus, tokenizer, tmp_path):
    with pytest.raises(ValueError, match="nothing_here"):
        pretraining.pretraining_dataset(str(tmp_path / "nothing_here*.txt"), tokenizer,
                                        batch_size=2)

    class NoVocab:
        vocab_size, pad_id, unk_id, cls_id, sep_id, mask_id = 30522, 0, 100, 101, 102, 103

        def tokenize(self, strings):
            return tokenizer.tokenize(strings)

    with pytest.raises(ValueError, match="whole_word_masking"):
        _small_dataset(sotu_corpus, NoVocab(), whole_word_masking=True)
    # Without a vocabulary, random replacements draw from all ids but the special ones.
    vocab = pretraining.vocab_for_tokenizer(NoVocab())
    assert len(vocab.random_token_ids) == 30522 - 5
    assert not np.isin([0, 100, 101, 102, 103], vocab.random_token_ids).any()
    small_vocab = tmp_path / "vocab.txt"
    small_vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n")
    with pytest.raises(ValueError, match="vocab.txt"):
        _small_dataset(sotu_corpus, tokenizer, vocab_file=str(small_vocab))


def test_a_worker_share_without_documents_is_refused_on_every_worker(shared_file, tokenizer,
                                                                       vocab_file):
    # BERT's sample_text.txt (one file, three documents) on two workers: documents are
    # split by element (0 and 2, then 1), and holding out every 20th document of each
    # share leaves worker 1 no training document, so its epochs are empty.
    sample = shared_file("corpus", "sample_text.txt")
    options = pretraining.PretrainingOptions(max_seq_length=32, max_predictions_per_seq=5,
                                             documents_per_window=4, holdout_every=20)
    # Worker 0 checks worker 1's share too: both stop before a step, neither waits.
    with pytest.raises(ValueError) as refused:
        pretraining.pretraining_dataset(sample, tokenizer, vocab_file, batch_size=8,
                                        options=options, num_epochs=None,
                                        input_context=tf.distribute.InputContext(2, 0, 2))
    assert str(refused.value) == (
        f"input pipeline 1 of 2 (one per worker) gets no training document from its share of "
        f"the 1 corpus file(s) {sample}: each worker needs documents of its own; give the "
        "corpus more documents, or at least 2 files (a worker then reads files of its own), "
        "or train on fewer workers")
    # Without the held-out split each share has a document, and trains.
    dataset = pretraining.pretraining_dataset(
        sample, tokenizer, vocab_file, batch_size=8, num_epochs=None,
        options=dataclasses.replace(options, holdout_every=0),
        input_context=tf.distribute.InputContext(2, 1, 2))
    assert next(iter(dataset))["input_ids"].shape == (4, 32)
