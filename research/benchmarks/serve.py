"""Serving speed of a raw-text classifier SavedModel vs a Model Garden equivalent.

    python -m research.bench serve [--preset bert_mini] [--max_seq_length 128]
        [--batch_sizes 1,32] [--iterations 50] [--warmup 3] [--no_garden]

Exports a randomly initialised `BertClassifier` (2 classes, shape from
`--preset`) with `bert_tf.export.export_model`, and builds Model Garden's
equivalent: `BertEncoderV2` + `BertClassifier` of the same shape behind its
own text preprocessing (`official.nlp.modeling.layers.BertTokenizer` +
`BertPackInputs`, i.e. tensorflow-text's `BertTokenizer`), saved as a
SavedModel whose `serving_default` takes raw text and returns
probabilities. Both are loaded back with `tf.saved_model.load` and called
through `serving_default` on real GLUE SST-2 dev sentences, in consecutive
batches. Calls alternate between the two models (the order swaps every
call) so that machine noise hits both; the table gives texts/second over
all timed calls and the p50/p95 latency of one call.

Model Garden's encoder uses its default tanh GELU, ours its default exact
(erf) GELU; the difference is a negligible part of a call.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from research.benchmarks.tokenizer import load_sentences  # noqa: E402
from tests import shared_data  # noqa: E402

LABELS = ["negative", "positive"]


def build_parser():
    """Command-line options of the benchmark."""
    parser = argparse.ArgumentParser(prog="python -m research.bench serve",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="bert_mini", help="encoder shape (bert_tf preset)")
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--batch_sizes", default="1,32", help="comma-separated batch sizes")
    parser.add_argument("--iterations", type=int, default=50, help="timed calls per batch size")
    parser.add_argument("--warmup", type=int, default=3, help="untimed calls first")
    parser.add_argument("--data", default=shared_data.data_path("glue", "SST-2", "dev.tsv"),
                        help="GLUE TSV with a 'sentence' column (default: SST-2 dev)")
    parser.add_argument("--vocab_file",
                        default=shared_data.data_path("vocab", "bert-base-uncased-vocab.txt"))
    parser.add_argument("--no_garden", action="store_true", help="skip Model Garden")
    return parser


def export_ours(config, vocab_file, max_seq_length, directory):
    """Exports our classifier; returns its version directory."""
    from bert_tf.checkpoints.task_record import TaskRecord
    from bert_tf.export import export_model
    from bert_tf.models import BertClassifier, BertEncoder
    from bert_tf.text.tokenizer import BertTokenizer

    model = BertClassifier(BertEncoder.from_encoder_config(config), len(LABELS))
    record = TaskRecord(kind="classifier", name="sst2", max_seq_length=max_seq_length,
                        label_names=LABELS, text_inputs=1)
    return export_model(model, BertTokenizer(vocab_file, lower_case=True),
                        os.path.join(directory, "bert_tf"), record)


def export_garden(config, vocab_file, max_seq_length, directory):
    """Saves Model Garden's same-shape classifier with its own preprocessing."""
    import tensorflow as tf
    import tf_keras
    from official.nlp.modeling import layers, models, networks

    tokenizer = layers.BertTokenizer(vocab_file=vocab_file, lower_case=True)
    packer = layers.BertPackInputs(max_seq_length,
                                   special_tokens_dict=tokenizer.get_special_tokens_dict())
    encoder = networks.BertEncoderV2(
        vocab_size=config.vocab_size, hidden_size=config.hidden_size,
        num_layers=config.num_layers, num_attention_heads=config.num_heads,
        max_sequence_length=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size, inner_dim=config.intermediate_size)
    classifier = models.BertClassifier(encoder, num_classes=len(LABELS))
    text = tf_keras.Input(shape=(), dtype=tf.string, name="text")
    logits = classifier(packer([tokenizer(text)]))
    model = tf_keras.Model(text, tf_keras.layers.Softmax(name="probabilities")(logits))

    module = tf.Module()
    module.model = model
    serve = tf.function(lambda text: {"probabilities": module.model(text, training=False)},
                        input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    path = os.path.join(directory, "garden", "1")
    tf.saved_model.save(module, path, signatures={"serving_default": serve})
    return path


def time_models(functions, sentences, batch_size, iterations, warmup):
    """{name: per-call seconds}, calls alternating between the functions."""
    import tensorflow as tf

    def batch(i):
        start = (i * batch_size) % len(sentences)
        rows = (sentences[start:] + sentences)[:batch_size]
        return tf.constant(rows)

    names = list(functions)
    seconds = {name: [] for name in names}
    for i in range(warmup + iterations):
        texts = batch(i)
        for name in (names if i % 2 == 0 else names[::-1]):
            start = time.perf_counter()
            outputs = functions[name](text=texts)
            outputs["probabilities"].numpy()  # wait for the result
            if i >= warmup:
                seconds[name].append(time.perf_counter() - start)
    return seconds


def _percentile(values, q):
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 \
        else values[0]


def summarize(seconds, batch_size):
    """texts/s, p50 and p95 latency (ms) of per-call times."""
    return {"texts_per_s": batch_size * len(seconds) / sum(seconds),
            "p50_ms": 1000 * _percentile(seconds, 50),
            "p95_ms": 1000 * _percentile(seconds, 95)}


def format_table(rows):
    """Markdown table of {batch_size: {model: summary}}."""
    lines = ["| batch | model | texts/s | p50 ms | p95 ms | texts/s ratio (bert_tf / garden) |",
             "|---|---|---|---|---|---|"]
    for batch_size, models in rows.items():
        ratio = ""
        if "garden" in models:
            ratio = f"{models['bert_tf']['texts_per_s'] / models['garden']['texts_per_s']:.2f}"
        for name, summary in models.items():
            lines.append(
                f"| {batch_size} | {name} | {summary['texts_per_s']:.1f} | "
                f"{summary['p50_ms']:.1f} | {summary['p95_ms']:.1f} | "
                f"{ratio if name == 'bert_tf' else ''} |")
    return "\n".join(lines)


def run(args):
    """Runs the benchmark; returns {batch_size: {model: summary}}."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (ops of both SavedModels)

    from bert_tf.models import get_preset

    sentences = load_sentences(args.data)
    config = get_preset(args.preset)
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    with tempfile.TemporaryDirectory() as directory:
        paths = {"bert_tf": export_ours(config, args.vocab_file, args.max_seq_length, directory)}
        if not args.no_garden:
            paths["garden"] = export_garden(config, args.vocab_file, args.max_seq_length,
                                            directory)
        functions = {name: tf.saved_model.load(path).signatures["serving_default"]
                     for name, path in paths.items()}
        rows = {}
        for batch_size in batch_sizes:
            seconds = time_models(functions, sentences, batch_size, args.iterations, args.warmup)
            rows[batch_size] = {name: summarize(values, batch_size)
                                for name, values in seconds.items()}
    return rows


def main(argv=None):
    """Entry point of `python -m research.bench serve`."""
    args = build_parser().parse_args(argv)
    rows = run(args)
    print(f"serving_default, raw text in; {args.preset}, max_seq_length "
          f"{args.max_seq_length}, {args.iterations} timed calls per batch size, "
          f"SST-2 dev sentences")
    print(format_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
