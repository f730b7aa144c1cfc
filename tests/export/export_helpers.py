"""Tiny task models and task records shared by the export tests."""

from bert_tf.checkpoints.task_record import TaskRecord

TASKS = {
    "classifier": TaskRecord(kind="classifier", name="mrpc", max_seq_length=32,
                             label_names=("not_equivalent", "equivalent"), text_inputs=2),
    "regressor": TaskRecord(kind="regressor", name="stsb", max_seq_length=24, text_inputs=1),
    "span_labeler": TaskRecord(kind="span_labeler", name="squad", max_seq_length=48,
                               version_2_with_negative=True, max_answer_length=8,
                               max_query_length=12),
    "token_classifier": TaskRecord(kind="token_classifier", name="ner", max_seq_length=16,
                                   label_names=("O", "B-PER", "I-PER", "B-LOC", "I-LOC")),
    "multiple_choice": TaskRecord(kind="multiple_choice", name="swag", max_seq_length=24,
                                  num_choices=3),
    "encoder": TaskRecord(kind="encoder", name="features", max_seq_length=20),
}


def tiny_config():
    """A tiny encoder config over the real uncased vocab."""
    from bert_tf.models.encoder_config import EncoderConfig

    return EncoderConfig(vocab_size=30522, hidden_size=32, num_layers=2, num_heads=4,
                         intermediate_size=64, max_position_embeddings=64)


def build_model(kind, record, seed=0):
    """A freshly initialised tiny model of a task kind."""
    import keras

    from bert_tf import models

    keras.utils.set_random_seed(seed)
    encoder = models.BertEncoder.from_encoder_config(tiny_config())
    if kind in ("classifier", "regressor"):
        return models.BertClassifier(
            encoder, 1 if kind == "regressor" else len(record.label_names))
    if kind == "span_labeler":
        return models.BertSpanLabeler(encoder)
    if kind == "token_classifier":
        return models.BertTokenClassifier(encoder, len(record.label_names))
    if kind == "multiple_choice":
        return models.BertMultipleChoice(encoder, record.num_choices)
    if kind == "pretrainer":
        return models.BertPretrainer(encoder)
    return encoder
