"""Training FLOPs of a pretraining step, counted from the architecture, length and batch.

One formula for every recipe, so recipes at another length, masking rate or
batch are counted alike. Per row of S positions (a packed row holds up to K
sequences; every position is computed, padding included), in multiply-adds
of the forward pass:

    encoder   S * L * (4 H^2 + 2 H I)   Q, K, V and output projections, the FFN
    attention S * L * 2 S H             scores (Q K^T) and context (weights x V)
    MLM head  P' * (H^2 + H V)          transform and tied vocabulary projection, on the
                                        row's P' prediction slots (padded slots included)
    NSP head  K * (H^2 + 2 H)           pooler and classifier, per sequence slot (if NSP)

A multiply-add is 2 FLOPs and a training step costs 3 forward passes (the
backward pass twice the forward), so training FLOPs = 6 x multiply-adds x
rows: the familiar 6 x (non-embedding parameters) x tokens plus attention,
plus the heads on the positions they score. Embedding lookups, layer norms,
softmaxes, GELUs, biases and the optimizer are left out (a few percent at
these sizes), for every recipe alike.
"""

import dataclasses

from bert_tf.data import packing
from bert_tf.tasks import pretraining as pretraining_task
from bert_tf.tasks import row_packing

# The formula in one line, for reports.
FORMULA = ("6 x rows x [S L (4H^2 + 2HI) + 2 L S^2 H + P' (H^2 + HV) + K (H^2 + 2H)] per step "
           "(S length, L layers, H hidden, I intermediate, V vocabulary, P' MLM prediction "
           "slots and K NSP slots per row)")


@dataclasses.dataclass(frozen=True)
class StepShape:
    """What one optimizer step computes on, from a resolved pretraining experiment."""

    num_layers: int
    hidden_size: int
    intermediate_size: int
    vocab_size: int
    seq_length: int
    # Rows per optimizer step (all micro-batches of gradient accumulation).
    batch_rows: int
    # MLM prediction slots per row (P').
    prediction_slots: int
    # Sequence slots per row with an NSP head (0 without NSP).
    nsp_slots: int

    @property
    def token_positions(self) -> int:
        """Positions computed per step (rows x length)."""
        return self.batch_rows * self.seq_length


def step_shape(experiment) -> StepShape:
    """The `StepShape` of a resolved `PretrainingExperiment`.

    Args:
      experiment: `bert_tf.tasks.load_experiment(...)[1]` of a pretraining config.
    """
    encoder, data = experiment.model.encoder, experiment.data
    if row_packing.is_packed(data):
        per_row = data.max_sequences_per_row
        # A masking schedule sizes the buffers for its highest rate.
        slots = packing.max_packed_predictions(data.max_seq_length, per_row,
                                               data.max_predictions_per_seq,
                                               pretraining_task.training_masked_lm_prob_max(data))
    else:
        per_row, slots = 1, data.max_predictions_per_seq
    return StepShape(
        num_layers=encoder.num_layers, hidden_size=encoder.hidden_size,
        intermediate_size=encoder.intermediate_size, vocab_size=encoder.vocab_size,
        seq_length=data.max_seq_length, batch_rows=experiment.trainer.global_batch_size,
        prediction_slots=slots, nsp_slots=per_row if experiment.model.use_nsp else 0)


def forward_multiply_adds_per_row(shape: StepShape) -> int:
    """Multiply-adds of one row's forward pass (see the module docstring)."""
    h, s = shape.hidden_size, shape.seq_length
    encoder = s * shape.num_layers * (4 * h * h + 2 * h * shape.intermediate_size)
    attention = s * shape.num_layers * 2 * s * h
    mlm = shape.prediction_slots * (h * h + h * shape.vocab_size)
    nsp = shape.nsp_slots * (h * h + 2 * h)
    return encoder + attention + mlm + nsp


def training_flops_per_step(shape: StepShape) -> float:
    """FLOPs of one optimizer step: 6 x forward multiply-adds x rows."""
    return 6.0 * forward_multiply_adds_per_row(shape) * shape.batch_rows
