import numpy as np
import pytest
from scipy.special import erf

from bert_tf.layers import (
    ClassificationHead,
    DropoutDenseHead,
    MultipleChoiceHead,
    SpanHead,
    TokenClassificationHead,
)
from bert_tf.models import BertEncoder, BertPretrainer
from tests.helpers import TINY, max_abs_diff, random_inputs


def _layer_norm(x, gamma, beta, eps=1e-12):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def test_masked_lm_head_is_tied_and_gathers_positions():
    encoder = BertEncoder.from_encoder_config(TINY)
    pretrainer = BertPretrainer(encoder)
    head = pretrainer.masked_lm_head
    # Tied: the head's only [V, D] matrix is the encoder's own variable,
    # and the model counts it once.
    shared = encoder.embeddings.word_embeddings.embeddings
    assert [w for w in head.weights if tuple(w.shape) == (100, 32)] == [shared]
    variables = pretrainer.trainable_variables
    assert len(variables) == len({id(v) for v in variables})
    inputs = random_inputs()
    positions = np.array([[1, 4, 0], [2, 2, 9]], "int32")
    logits = pretrainer({**inputs, "masked_lm_positions": positions})["mlm_logits"].numpy()
    assert logits.shape == (2, 3, 100) and logits.dtype == np.float32

    sequence = encoder(inputs)["sequence_output"].numpy()
    gathered = np.take_along_axis(sequence, positions[:, :, None], axis=1)
    hidden = gathered @ head.transform.kernel.numpy() + head.transform.bias.numpy()
    hidden = 0.5 * hidden * (1 + erf(hidden / np.sqrt(2)))
    hidden = _layer_norm(hidden, head.layer_norm.gamma.numpy(), head.layer_norm.beta.numpy())
    expected = hidden @ encoder.word_embeddings.embeddings.numpy().T + head.output_bias.numpy()
    assert max_abs_diff(logits, expected) < 1e-4


def test_pretrainer_without_nsp():
    pretrainer = BertPretrainer(BertEncoder.from_encoder_config(TINY), use_nsp=False)
    outputs = pretrainer({**random_inputs(), "masked_lm_positions": np.zeros((2, 2), "int32")})
    assert set(outputs) == {"mlm_logits"}


def test_next_sentence_head_shape():
    pretrainer = BertPretrainer(BertEncoder.from_encoder_config(TINY))
    outputs = pretrainer({**random_inputs(batch=5),
                          "masked_lm_positions": np.zeros((5, 1), "int32")})
    assert tuple(outputs["nsp_logits"].shape) == (5, 2)


def test_classification_head_dropout_and_dense():
    head = ClassificationHead(3, dropout=0.5)
    pooled = np.random.default_rng(0).normal(size=(4, 8)).astype("float32")
    out = head(pooled, training=False).numpy()
    assert max_abs_diff(out, pooled @ head.dense.kernel.numpy() + head.dense.bias.numpy()) < 1e-5
    assert max_abs_diff(out, head(pooled, training=True).numpy()) > 1e-4
    assert tuple(ClassificationHead(1)(pooled).shape) == (4, 1)  # regression
    with pytest.raises(ValueError, match="num_classes"):
        ClassificationHead(0)


def test_span_head_splits_start_and_end():
    head = SpanHead()
    sequence = np.random.default_rng(1).normal(size=(2, 5, 8)).astype("float32")
    start, end = head(sequence)
    full = sequence @ head.dense.kernel.numpy() + head.dense.bias.numpy()
    assert max_abs_diff(start, full[..., 0]) < 1e-5
    assert max_abs_diff(end, full[..., 1]) < 1e-5


def test_token_classification_head_shape():
    head = TokenClassificationHead(9)
    assert tuple(head(np.zeros((2, 5, 8), "float32")).shape) == (2, 5, 9)


def test_multiple_choice_head_groups_choices():
    head = MultipleChoiceHead(4, dropout=0.0)
    # 2 examples x 4 choices
    pooled = np.random.default_rng(2).normal(size=(8, 6)).astype("float32")
    logits = head(pooled).numpy()
    scores = (pooled @ head.dense.kernel.numpy() + head.dense.bias.numpy())[:, 0]
    assert logits.shape == (2, 4)
    assert max_abs_diff(logits, scores.reshape(2, 4)) < 1e-5


@pytest.mark.parametrize("make, rows, width_key", [
    (lambda: ClassificationHead(3, name="classification_head"), (4, 8), "num_classes"),
    (lambda: TokenClassificationHead(5, name="token_classification_head"), (2, 3, 8),
     "num_labels"),
    (lambda: MultipleChoiceHead(4, name="multiple_choice_head"), (8, 8), "num_choices"),
])
def test_heads_on_dropout_dense_keep_weight_paths_and_config(make, rows, width_key):
    head = make()
    features = np.random.default_rng(3).normal(size=rows).astype("float32")
    out = head(features)
    # Checkpoints and converters key the weights by these paths.
    assert [v.path for v in head.trainable_variables] == [
        f"{head.name}/dense/kernel", f"{head.name}/dense/bias"]
    config = head.get_config()
    assert "units" not in config and config[width_key] == getattr(head, width_key)
    clone = type(head).from_config(config)
    assert tuple(clone(features).shape) == tuple(out.shape)


def test_dropout_dense_head_is_dropout_then_dense():
    head = DropoutDenseHead(2, dropout=0.5, name="probe")
    features = np.random.default_rng(4).normal(size=(3, 5, 6)).astype("float32")
    out = head(features, training=False).numpy()
    expected = features @ head.dense.kernel.numpy() + head.dense.bias.numpy()
    assert out.shape == (3, 5, 2) and out.dtype == np.float32
    assert max_abs_diff(out, expected) < 1e-5
    assert max_abs_diff(out, head(features, training=True).numpy()) > 1e-4
    assert DropoutDenseHead.from_config(head.get_config()).units == 2
    with pytest.raises(ValueError, match="units"):
        DropoutDenseHead(0)
