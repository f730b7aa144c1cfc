"""The train-step benchmark: its inputs, FLOP count and both models' steps."""

import numpy as np
import pytest

from bert_tf.models.presets import get_preset
from research.benchmarks import train
from tests.helpers import TINY

# A benchmark's own run: the second test command (-m long).
pytestmark = pytest.mark.long


def test_step_flops_of_bert_mini():
    config = get_preset("bert_mini")
    flops = train.step_matmul_flops(config, batch_size=1, seq_length=128, max_predictions=20)
    # Matmul FLOPs per sequence: encoder 872 M, pooler, MLM head 315 M (20
    # predictions); x 3 for the forward pass and the backward pass's two.
    assert flops == 3 * (128 * 4 * (8 * 256 ** 2 + 4 * 256 * 1024 + 4 * 128 * 256)
                         + 2 * 256 ** 2 + 20 * (2 * 256 ** 2 + 2 * 256 * 30522))
    assert 3.5e9 < flops < 3.6e9


def test_synthetic_batch_masks_real_tokens_only():
    batch = train.synthetic_batch(64, 128, 20, 30522, seed=1)
    lengths = batch["padding_mask"].sum(1)
    assert (lengths == 128).mean() > 0.5 and lengths.min() >= 64
    assert (batch["token_ids"][batch["padding_mask"] == 0] == 0).all()
    for row in range(64):
        count = int(batch["masked_lm_weights"][row].sum())
        assert count == min(20, round(0.15 * lengths[row]))
        positions = batch["masked_lm_positions"][row, :count]
        assert (positions >= 1).all() and (positions < lengths[row] - 1).all()
        assert len(set(positions)) == count
    assert set(np.unique(batch["next_sentence_labels"])) == {0, 1}


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_both_steps_train_the_same_model_shapes(policy):
    config = TINY.replace(max_position_embeddings=16)
    batch = train.synthetic_batch(4, 16, 3, config.vocab_size)
    ours, optimizer = train.build_ours(config, policy)
    garden, garden_optimizer = train.build_garden(config, policy)
    our_step = train.our_train_step(ours, optimizer)
    garden_step = train.garden_train_step(garden, garden_optimizer)
    # Dropout is active, so a few steps of lr 1e-4 are needed to see learning.
    our_losses = [float(our_step(*train.our_inputs(batch))) for _ in range(8)]
    garden_losses = [float(garden_step(*train.garden_inputs(batch))) for _ in range(8)]
    # Fresh models on the same batch: about log(V) + log(2), then learning.
    for losses in (our_losses, garden_losses):
        assert abs(losses[0] - np.log(config.vocab_size) - np.log(2)) < 0.5
        assert losses[-1] < losses[0]
    # Same weights to train, to the parameter, once Model Garden's encoder
    # pooler is left out (unused: its NSP head pools the first token itself).
    def count(variables):
        return sum(int(np.prod(v.shape)) for v in variables)
    garden_variables = [v for v in garden.trainable_variables if "pooler_transform" not in v.name]
    assert count(ours.trainable_variables) == count(garden_variables)
