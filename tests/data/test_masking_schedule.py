"""A masking rate that moves over training (`bert_tf.data.pretraining.MaskingSchedule`)."""

import functools

import numpy as np
import pytest

from bert_tf.data import packing, pretraining
from bert_tf.text.tokenizer import BertTokenizer

# A toy vocabulary of ~100 entries: the specials, then plain words.
WORDS = [f"w{i}" for i in range(90)]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
BATCH, STEPS, LENGTH = 8, 6, 32


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Vocab file and a corpus of long documents of 12-word sentences (rows near full)."""
    folder = tmp_path_factory.mktemp("schedule")
    vocab_file = folder / "vocab.txt"
    vocab_file.write_text("\n".join(VOCAB) + "\n")
    rng = np.random.default_rng(0)
    documents = ["\n".join(" ".join(rng.choice(WORDS, 12)) for _ in range(30))
                 for _ in range(12)]
    (folder / "corpus.txt").write_text("\n\n".join(documents) + "\n")
    return str(folder / "corpus.txt"), str(vocab_file)


@functools.cache
def _batches(corpus, schedule=None, packed=False, steps=STEPS, masked_lm_prob=0.15):
    """The first `steps` batches (a pipeline built once per setting: seconds each)."""
    corpus_file, vocab_file = corpus
    options = pretraining.PretrainingOptions(
        max_seq_length=LENGTH, max_predictions_per_seq=12, masked_lm_prob=masked_lm_prob,
        masking_schedule=schedule, short_seq_prob=0.0, seed=3, documents_per_window=4,
        shuffle_buffer_size=16, packing=packing.PackingOptions() if packed else None)
    dataset = pretraining.pretraining_dataset(
        corpus_file, BertTokenizer(vocab_file, lower_case=True), vocab_file,
        batch_size=BATCH, options=options, num_epochs=None)
    return list(dataset.take(steps).as_numpy_iterator())


def _masked_fraction(batch):
    """Predicted tokens over real tokens (BERT's budget counts [CLS] and [SEP])."""
    return batch["masked_lm_weights"].sum() / (batch["input_mask"] > 0).sum()


def test_the_rate_falls_linearly_then_stays():
    schedule = pretraining.MaskingSchedule(start=0.3, end=0.15, steps=10)
    rates = [float(schedule.rate(step)) for step in (0, 5, 10, 20)]
    np.testing.assert_allclose(rates, [0.3, 0.225, 0.15, 0.15], atol=1e-7)
    assert schedule.max_rate == 0.3
    assert pretraining.MaskingSchedule(start=0.1, end=0.2, steps=4).max_rate == 0.2


@pytest.mark.parametrize("values, message", [
    ({"start": 0.0, "end": 0.15, "steps": 10}, r"start must be in \(0, 1\), got 0.0"),
    ({"start": 0.3, "end": 1.0, "steps": 10}, r"end must be in \(0, 1\), got 1.0"),
    ({"start": 0.3, "end": 0.15, "steps": 0}, "steps must be >= 1, got 0"),
])
def test_bad_schedules_are_refused_naming_the_value(values, message):
    with pytest.raises(ValueError, match=message):
        pretraining.MaskingSchedule(**values)


# Seconds each: pipelines over a small corpus; packed rows repeat the case (long).
@pytest.mark.slow
@pytest.mark.parametrize("packed", [False, pytest.param(True, marks=pytest.mark.long)])
def test_the_realised_masked_fraction_follows_the_schedule(corpus, packed):
    # 30 % falling to 15 % over the first 4 of 6 steps: each batch's share of predicted
    # tokens is its step's rate, up to the per-sequence rounding (half a token in 32).
    schedule = pretraining.MaskingSchedule(start=0.3, end=0.15, steps=STEPS - 2)
    batches = _batches(corpus, schedule, packed)
    realised = [_masked_fraction(batch) for batch in batches]
    expected = [0.3, 0.2625, 0.225, 0.1875, 0.15, 0.15]
    np.testing.assert_allclose(realised, expected, atol=0.02)
    assert realised[0] - realised[-1] > 0.12


# Seconds each: pipelines over a small corpus; packed rows repeat the case (long).
@pytest.mark.slow
@pytest.mark.parametrize("packed", [False, pytest.param(True, marks=pytest.mark.long)])
def test_a_constant_schedule_gives_exactly_the_batches_of_a_fixed_rate(corpus, packed):
    # Only the rate moves: the masks are keyed as without a schedule.
    fixed = _batches(corpus, packed=packed)
    constant = _batches(corpus, pretraining.MaskingSchedule(0.15, 0.15, 3), packed)
    assert len(fixed) == len(constant) == STEPS
    for one, other in zip(fixed, constant):
        assert one.keys() == other.keys()
        for name in one:
            np.testing.assert_array_equal(one[name], other[name], err_msg=name)


@pytest.mark.long  # a pipeline of packed rows
def test_a_schedule_sizes_packed_buffers_for_its_highest_rate(corpus):
    schedule = pretraining.MaskingSchedule(start=0.3, end=0.15, steps=STEPS - 2)
    batch = _batches(corpus, schedule, packed=True)[0]
    per_row = packing.PackingOptions().max_sequences_per_row
    assert batch["masked_lm_ids"].shape[1] == packing.max_packed_predictions(
        LENGTH, per_row, 12, 0.3)


def test_a_schedule_needs_batches_from_the_start(corpus):
    corpus_file, vocab_file = corpus
    tokenizer = BertTokenizer(vocab_file, lower_case=True)
    options = pretraining.PretrainingOptions(
        max_seq_length=LENGTH, max_predictions_per_seq=12,
        masking_schedule=pretraining.MaskingSchedule(0.3, 0.15, 4))
    for kwargs in ({"batch_size": None}, {"batch_size": 8, "start_example": 5},
                   {"batch_size": 8, "epoch": 1}):
        with pytest.raises(ValueError, match="a masking schedule counts training steps"):
            pretraining.pretraining_dataset(corpus_file, tokenizer, vocab_file,
                                            options=options, **kwargs)
    with pytest.raises(ValueError, match="a masking schedule needs training steps"):
        pretraining.pretraining_examples(None, tokenizer, vocab_file, options)
