"""Each checkpoint format read by its own reference, not by bert_tf's reader.

`reference_outputs(format, path, inputs, encoder_config)` gives the sequence and
pooled outputs of the encoder at `path` as that format's reference computes them:

  hf        a float64 NumPy forward pass of BERT straight from `config.json` and
            `model.safetensors` (Hugging Face tensor names and activation names;
            transformers itself is not installed)
  garden    Model Garden's `BertEncoderV2` (tf-models-official) of the expected
            architecture, filled by TensorFlow's object-based restore
  kerashub  KerasHub's `BertBackbone.from_preset`
  bert_tf, google
            bert_tf's own loader (google-research/bert's TF1 code does not run
            on TF 2; the Google tests compare its reads with Hugging Face's outputs)

Legend: B batch, S sequence, N heads, H head size, D hidden.
"""

import json
import os

import numpy as np

# Hugging Face `hidden_act` names (transformers' ACT2FN) -> the GELU form they compute.
HF_EXACT_GELU = ("gelu",)
HF_TANH_GELU = ("gelu_new", "gelu_pytorch_tanh", "gelu_fast")


def _hf_activation(name):
    from scipy.special import erf

    if name in HF_EXACT_GELU:
        return lambda x: 0.5 * x * (1 + erf(x / np.sqrt(2)))
    if name in HF_TANH_GELU:
        return lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    if name == "relu":
        return lambda x: np.maximum(x, 0)
    # What transformers raises for a name it does not know.
    raise KeyError(f"hidden_act {name!r} is not a Hugging Face activation")


def hf_forward_float64(state, config, input_ids, segment_ids, input_mask):
    """BERT's forward pass in float64 NumPy from Hugging Face tensor names.

    Args:
      state: {Hugging Face key: array}; a `bert.` prefix (BertForPreTraining) is allowed.
      config: the `config.json` values (`num_attention_heads`, `hidden_act`, `layer_norm_eps`).
      input_ids, segment_ids, input_mask: [B, S] integer arrays.

    Returns:
      (sequence output [B, S, D], pooled output [B, D]), float64.
    """
    w = {key.removeprefix("bert."): value.astype(np.float64)
         for key, value in state.items() if value.dtype.kind == "f"}
    epsilon = config.get("layer_norm_eps", 1e-12)
    activation = _hf_activation(config.get("hidden_act", "gelu"))
    num_heads = config["num_attention_heads"]

    def layer_norm(x, prefix):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + epsilon) * w[prefix + ".weight"] + w[prefix + ".bias"]

    def dense(x, prefix):
        return x @ w[prefix + ".weight"].T + w[prefix + ".bias"]

    length = input_ids.shape[1]
    x = (w["embeddings.word_embeddings.weight"][input_ids]
         + w["embeddings.token_type_embeddings.weight"][segment_ids]
         + w["embeddings.position_embeddings.weight"][:length][None])
    x = layer_norm(x, "embeddings.LayerNorm")
    bias = (1 - input_mask[:, None, None, :]) * -1e9  # [B, 1, 1, S]
    batch, _, hidden = x.shape
    head = hidden // num_heads
    index = 0
    while f"encoder.layer.{index}.output.dense.weight" in w:
        p = f"encoder.layer.{index}."
        q, k, v = (dense(x, p + f"attention.self.{n}").reshape(batch, length, num_heads, head)
                   for n in ("query", "key", "value"))  # [B, S, N, H]
        scores = np.einsum("bsnh,btnh->bnst", q, k) / np.sqrt(head) + bias
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        context = np.einsum("bnst,btnh->bsnh", probs, v).reshape(batch, length, hidden)
        x = layer_norm(x + dense(context, p + "attention.output.dense"),
                       p + "attention.output.LayerNorm")
        x = layer_norm(x + dense(activation(dense(x, p + "intermediate.dense")),
                                 p + "output.dense"), p + "output.LayerNorm")
        index += 1
    return x, np.tanh(dense(x[:, 0], "pooler.dense"))


def hf_reference(path, inputs):
    """(sequence, pooled) of the Hugging Face directory `path`, float64."""
    from safetensors.numpy import load_file

    with open(os.path.join(path, "config.json")) as f:
        config = json.load(f)
    state = load_file(os.path.join(path, "model.safetensors"))
    return hf_forward_float64(state, config, np.asarray(inputs["token_ids"]),
                              np.asarray(inputs["segment_ids"]),
                              np.asarray(inputs["padding_mask"]))


def garden_reference(path, inputs, encoder_config):
    """(sequence, pooled) of Model Garden's `BertEncoderV2` restored from `path`."""
    import tensorflow as tf

    from bert_tf.checkpoints import model_garden

    garden = model_garden.build_garden_encoder(encoder_config)
    prefix = tf.train.latest_checkpoint(path) or os.path.join(
        path, next(n for n in os.listdir(path) if n.endswith(".index"))[: -len(".index")])
    # Every encoder variable must come from the checkpoint, and nothing be left over.
    tf.train.Checkpoint(encoder=garden).read(prefix).assert_consumed()
    outputs = garden(dict(input_word_ids=tf.constant(inputs["token_ids"]),
                          input_mask=tf.constant(inputs["padding_mask"]),
                          input_type_ids=tf.constant(inputs["segment_ids"])), training=False)
    return outputs["sequence_output"].numpy(), outputs["pooled_output"].numpy()


def kerashub_reference(path, inputs):
    """(sequence, pooled) of KerasHub's `BertBackbone.from_preset(path)`."""
    import keras_hub

    outputs = keras_hub.models.BertBackbone.from_preset(path)(inputs, training=False)
    return np.asarray(outputs["sequence_output"]), np.asarray(outputs["pooled_output"])


def bert_tf_reference(path, inputs, fmt):
    """(sequence, pooled) of the encoder bert_tf reads from `path` in format `fmt`."""
    from bert_tf.checkpoints import loading

    outputs = loading.load_encoder(path, format=fmt)(inputs, training=False)
    return np.asarray(outputs["sequence_output"]), np.asarray(outputs["pooled_output"])


def reference_outputs(fmt, path, inputs, encoder_config):
    """(sequence output [B, S, D], pooled output [B, D]) of `path` read by `fmt`'s reference.

    Args:
      fmt: "bert_tf", "hf", "google", "garden" or "kerashub".
      path: the checkpoint directory.
      inputs: {"token_ids", "segment_ids", "padding_mask"} [B, S] int32 arrays.
      encoder_config: the expected architecture (only Model Garden's reference needs
        it: its checkpoints are restored into a model built beforehand).
    """
    if fmt == "hf":
        return hf_reference(path, inputs)
    if fmt == "garden":
        return garden_reference(path, inputs, encoder_config)
    if fmt == "kerashub":
        return kerashub_reference(path, inputs)
    if fmt in ("bert_tf", "google"):
        return bert_tf_reference(path, inputs, fmt)
    raise ValueError(f"no reference loader for format {fmt!r}")


def unpadded_differences(reference, original, padding_mask):
    """(max |diff| of the sequence outputs on unpadded positions, of the pooled outputs).

    Args:
      reference, original: (sequence [B, S, D], pooled [B, D]) pairs.
      padding_mask: [B, S], 1 on real tokens.
    """
    real = np.asarray(padding_mask).astype(bool)
    sequence = np.abs(np.asarray(reference[0], np.float64)
                      - np.asarray(original[0], np.float64))[real]
    pooled = np.abs(np.asarray(reference[1], np.float64) - np.asarray(original[1], np.float64))
    return float(sequence.max()), float(pooled.max())
