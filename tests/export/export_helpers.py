"""Tiny task models and task infos shared by the export tests."""

TASKS = {
    "classifier": {"name": "mrpc", "kind": "classifier", "max_seq_length": 32,
                   "label_names": ["not_equivalent", "equivalent"], "text_inputs": 2},
    "regressor": {"name": "stsb", "kind": "regressor", "max_seq_length": 24, "text_inputs": 1},
    "span_labeler": {"name": "squad", "kind": "span_labeler", "max_seq_length": 48,
                     "version_2_with_negative": True, "max_answer_length": 8,
                     "max_query_length": 12},
    "token_classifier": {"name": "ner", "kind": "token_classifier", "max_seq_length": 16,
                         "label_names": ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]},
    "multiple_choice": {"name": "swag", "kind": "multiple_choice", "max_seq_length": 24,
                        "num_choices": 3},
    "encoder": {"name": "features", "kind": "encoder", "max_seq_length": 20},
}


def tiny_config():
    """A tiny encoder config over the real uncased vocab."""
    from bert_tf.models.encoder_config import EncoderConfig

    return EncoderConfig(vocab_size=30522, hidden_size=32, num_layers=2, num_heads=4,
                         intermediate_size=64, max_position_embeddings=64)


def build_model(kind, task_info, seed=0):
    """A freshly initialised tiny model of a task kind."""
    import keras

    from bert_tf import models

    keras.utils.set_random_seed(seed)
    encoder = models.BertEncoder.from_encoder_config(tiny_config())
    if kind in ("classifier", "regressor"):
        return models.BertClassifier(
            encoder, 1 if kind == "regressor" else len(task_info["label_names"]))
    if kind == "span_labeler":
        return models.BertSpanLabeler(encoder)
    if kind == "token_classifier":
        return models.BertTokenClassifier(encoder, len(task_info["label_names"]))
    if kind == "multiple_choice":
        return models.BertMultipleChoice(encoder, task_info["num_choices"])
    if kind == "pretrainer":
        return models.BertPretrainer(encoder)
    return encoder
