"""Named encoder sizes: Google's 24 compact BERTs plus BERT-base and BERT-large.

The compact models (Turc et al., 2019, "Well-Read Students Learn Better") cover
L in {2, 4, 6, 8, 10, 12} x H in {128, 256, 512, 768} with A = H / 64 heads and
I = 4H. Four of them have common names (tiny, mini, small, medium).
"""

from bert_tf.models.encoder_config import EncoderConfig

_COMPACT_LAYERS = (2, 4, 6, 8, 10, 12)
_COMPACT_HIDDEN = (128, 256, 512, 768)

# Common names of compact models, as published with the compact checkpoints.
_ALIASES = {
    "bert_tiny": "bert_L-2_H-128_A-2",
    "bert_mini": "bert_L-4_H-256_A-4",
    "bert_small": "bert_L-4_H-512_A-8",
    "bert_medium": "bert_L-8_H-512_A-8",
}


def _compact_presets():
    presets = {}
    for layers in _COMPACT_LAYERS:
        for hidden in _COMPACT_HIDDEN:
            heads = hidden // 64
            presets[f"bert_L-{layers}_H-{hidden}_A-{heads}"] = EncoderConfig(
                hidden_size=hidden, num_layers=layers, num_heads=heads,
                intermediate_size=4 * hidden)
    return presets


PRESETS = _compact_presets()
PRESETS["bert_base"] = EncoderConfig()
PRESETS["bert_large"] = EncoderConfig(
    hidden_size=1024, num_layers=24, num_heads=16, intermediate_size=4096)
for _alias, _target in _ALIASES.items():
    PRESETS[_alias] = PRESETS[_target]


def preset_names() -> list[str]:
    """All preset names, sorted."""
    return sorted(PRESETS)


def get_preset(name: str, **overrides) -> EncoderConfig:
    """The `EncoderConfig` of a named preset, optionally with fields replaced.

    Accepts "bert_base", "bert_tiny", "bert_L-4_H-256_A-4" and the same names
    without the "bert_" prefix or with dashes for underscores ("mini", "base").
    """
    key = name.strip().lower().replace("-", "_")
    candidates = [key, f"bert_{key}"]
    lookup = {k.lower().replace("-", "_"): k for k in PRESETS}
    for candidate in candidates:
        if candidate in lookup:
            return PRESETS[lookup[candidate]].replace(**overrides)
    raise ValueError(f"unknown encoder preset {name!r}; expected one of {preset_names()}")
