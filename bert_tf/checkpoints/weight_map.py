"""Canonical names of every weight, shared by all checkpoint formats.

The canonical name of a weight is its Google TF1 name (google-research/bert),
because every other format translates to it one-to-one. A `Slot` pairs that
name with our variable and the weight's `kind`, which tells the format
adapters how to reshape or transpose it.
"""

import dataclasses

# Kinds of weights. Format adapters dispatch on these.
EMBEDDING = "embedding"  # [rows, D], same layout everywhere
KERNEL = "kernel"  # Keras/TF1 [in, out]; PyTorch [out, in]
BIAS = "bias"
GAMMA = "gamma"  # LayerNorm scale
BETA = "beta"  # LayerNorm offset
# NSP output weights are stored [2, D] by TF1 and PyTorch; our kernel is [D, 2].
TRANSPOSED_KERNEL = "transposed_kernel"
# Task-head weights that exist only in this project's own format.
NATIVE = "native"


@dataclasses.dataclass(frozen=True)
class Slot:
    """One weight: canonical (Google TF1) name, our variable, and its kind."""

    name: str
    variable: object
    kind: str


def _dense_slots(prefix, dense, kernel_kind=KERNEL):
    return [Slot(f"{prefix}/kernel", dense.kernel, kernel_kind),
            Slot(f"{prefix}/bias", dense.bias, BIAS)]


def _layer_norm_slots(prefix, layer_norm):
    return [Slot(f"{prefix}/gamma", layer_norm.gamma, GAMMA),
            Slot(f"{prefix}/beta", layer_norm.beta, BETA)]


def encoder_slots(encoder):
    """Slots of a `BertEncoder`, in checkpoint order."""
    emb = encoder.embeddings
    slots = [
        Slot("bert/embeddings/word_embeddings", emb.word_embeddings.embeddings, EMBEDDING),
        Slot("bert/embeddings/token_type_embeddings",
             emb.segment_embeddings.embeddings, EMBEDDING),
        Slot("bert/embeddings/position_embeddings",
             emb.position_embeddings.embeddings, EMBEDDING),
        *_layer_norm_slots("bert/embeddings/LayerNorm", emb.layer_norm),
    ]
    for index, block in enumerate(encoder.transformer_layers):
        prefix = f"bert/encoder/layer_{index}"
        attention = block.self_attention
        for part in ("query", "key", "value"):
            slots += _dense_slots(f"{prefix}/attention/self/{part}", getattr(attention, part))
        slots += _dense_slots(f"{prefix}/attention/output/dense", attention.attention_output)
        slots += _layer_norm_slots(f"{prefix}/attention/output/LayerNorm",
                                   block.attention_layer_norm)
        slots += _dense_slots(f"{prefix}/intermediate/dense", block.intermediate)
        slots += _dense_slots(f"{prefix}/output/dense", block.output_dense)
        slots += _layer_norm_slots(f"{prefix}/output/LayerNorm", block.output_layer_norm)
    slots += _dense_slots("bert/pooler/dense", encoder.pooler)
    return slots


def pretraining_head_slots(pretrainer):
    """Slots of a `BertPretrainer`'s heads (`cls/...` in TF1 checkpoints)."""
    mlm = pretrainer.masked_lm_head
    slots = [
        *_dense_slots("cls/predictions/transform/dense", mlm.transform),
        *_layer_norm_slots("cls/predictions/transform/LayerNorm", mlm.layer_norm),
        Slot("cls/predictions/output_bias", mlm.output_bias, BIAS),
    ]
    if pretrainer.next_sentence_head is not None:
        nsp = pretrainer.next_sentence_head.dense
        slots += [Slot("cls/seq_relationship/output_weights", nsp.kernel, TRANSPOSED_KERNEL),
                  Slot("cls/seq_relationship/output_bias", nsp.bias, BIAS)]
    return slots


def model_slots(model):
    """Slots of an encoder or a pretrainer (encoder first)."""
    from bert_tf.models.bert_encoder import BertEncoder
    from bert_tf.models.bert_pretrainer import BertPretrainer

    if isinstance(model, BertEncoder):
        return encoder_slots(model)
    if isinstance(model, BertPretrainer):
        return encoder_slots(model.encoder) + pretraining_head_slots(model)
    raise TypeError(
        f"expected a BertEncoder or BertPretrainer, got {type(model).__name__}")


def task_slots(model):
    """Slots of any bert_tf model, for this project's own checkpoint format.

    Encoder and pretraining heads use their canonical names; other task
    heads (classifier, span, tagging, multiple choice) use `heads/` plus the
    Keras variable path, which their explicit layer names keep stable.
    """
    from bert_tf.models.bert_encoder import BertEncoder
    from bert_tf.models.bert_pretrainer import BertPretrainer

    if isinstance(model, (BertEncoder, BertPretrainer)):
        return model_slots(model)
    encoder = model.encoder
    slots = encoder_slots(encoder)
    encoder_ids = {id(v) for v in encoder.weights}
    slots += [Slot(f"heads/{v.path}", v, NATIVE) for v in model.weights
              if id(v) not in encoder_ids]
    return slots
