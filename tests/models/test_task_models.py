import os

import keras
import numpy as np
import pytest
import tree

from bert_tf.models import (
    BertClassifier,
    BertEncoder,
    BertMultipleChoice,
    BertPretrainer,
    BertSpanLabeler,
    BertTokenClassifier,
)
from tests.helpers import TINY, max_abs_diff, random_inputs


def _cases():
    inputs = random_inputs(batch=2, length=8)
    choice_inputs = {k: np.stack([v, v[::-1], v, v], axis=1) for k, v in inputs.items()}
    positions = {"masked_lm_positions": np.array([[1, 3], [2, 5]], "int32")}
    return [
        (lambda e: BertPretrainer(e), {**inputs, **positions},
         {"mlm_logits": (2, 2, 100), "nsp_logits": (2, 2)}),
        (lambda e: BertClassifier(e, num_classes=3), inputs, {"logits": (2, 3)}),
        (lambda e: BertClassifier(e, num_classes=1), inputs, {"logits": (2, 1)}),
        (lambda e: BertSpanLabeler(e), inputs, {"start_logits": (2, 8), "end_logits": (2, 8)}),
        (lambda e: BertTokenClassifier(e, num_labels=9), inputs, {"logits": (2, 8, 9)}),
        (lambda e: BertMultipleChoice(e, num_choices=4), choice_inputs, {"logits": (2, 4)}),
    ]


@pytest.mark.parametrize("case", range(6))
def test_task_model_shapes_and_keras_round_trip(case, tmp_path):
    build, inputs, shapes = _cases()[case]
    model = build(BertEncoder.from_encoder_config(TINY))
    outputs = model(inputs, training=False)
    assert {k: tuple(v.shape) for k, v in outputs.items()} == shapes
    path = os.path.join(tmp_path, "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert type(loaded) is type(model)
    again = loaded(inputs, training=False)
    for a, b in zip(tree.flatten(outputs), tree.flatten(again)):
        assert max_abs_diff(a, b) == 0.0


def test_multiple_choice_scores_each_choice_independently():
    encoder = BertEncoder.from_encoder_config(TINY)
    model = BertMultipleChoice(encoder, num_choices=4, dropout=0.0)
    inputs = random_inputs(batch=4, length=8, seed=3)
    grouped = {k: v[None] for k, v in inputs.items()}  # [1, 4, S]
    logits = model(grouped, training=False)["logits"].numpy()[0]
    pooled = encoder(inputs, training=False)["pooled_output"].numpy()
    dense = model.head.dense
    assert max_abs_diff(logits, (pooled @ dense.kernel.numpy() + dense.bias.numpy())[:, 0]) < 1e-5


def test_pretrainer_after_reload_keeps_weights_tied(tmp_path):
    model = BertPretrainer(BertEncoder.from_encoder_config(TINY))
    path = os.path.join(tmp_path, "pretrainer.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert (loaded.masked_lm_head.word_embeddings.embeddings
            is loaded.encoder.embeddings.word_embeddings.embeddings)
