"""The `finetuned` part of the serving benchmark: task quality of every export variant.

Fine-tunes the benchmark's model on GLUE SST-2, MRPC and STS-B with the
packaged recipes (`python -m bert_tf.train --config finetune/glue_TASK
--init_checkpoint MODEL_DIR`; the `full` profile trains SST-2 for one epoch
instead of three), exports each run the four ways of `serving_runtimes.EXPORTS`
(SavedModel fp32 and int8, ONNX fp32 and int8) and scores the dev set through
each: accuracy for SST-2 and MRPC, Pearson for STS-B. Every variant gets the
same token ids (our tokenizer and packer, pairs packed as the exports pack
them). The runs and exports live in DIR/finetuned/TASK and are reused by a
rerun (an interrupted run resumes from its checkpoint).
"""

import os
import subprocess
import sys
import time

from tests import shared_data

# task -> (metric, the export output it is computed from)
TASKS = {"sst2": ("accuracy", "logits"), "mrpc": ("accuracy", "logits"),
         "stsb": ("pearson", "score")}
VARIANTS = ("export_ids", "export_int8", "ort_fp32", "ort_int8")
BATCH = 32


def finetune(task, init_dir, run_dir, overrides, log):
    """Runs (or resumes, or finds finished) the packaged fine-tuning of `task`."""
    command = [sys.executable, "-m", "bert_tf.train", "--config", f"finetune/glue_{task}",
               "--init_checkpoint", init_dir, "--model_dir", run_dir,
               "--set", f"data.data_dir={shared_data.data_path('glue')}"]
    for override in overrides:
        command += ["--set", override]
    os.makedirs(run_dir, exist_ok=True)
    start = time.perf_counter()
    with open(os.path.join(os.path.dirname(run_dir), "train.log"), "a") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT,
                              env=dict(os.environ, PYTHONUNBUFFERED="1"))
    if done.returncode != 0:
        raise RuntimeError(f"fine-tuning {task} failed (exit {done.returncode}); see "
                           f"{os.path.dirname(run_dir)}/train.log")
    log(f"    {task}: fine-tuned ({time.perf_counter() - start:.0f} s)")


def dev_batches(task, vocab_file, max_seq_length, limit):
    """[(feed {input name: np.int32 [B, S]}, labels)] of the task's dev set, packed as
    the exports pack a request; labels are strings (classes) or floats (STS-B)."""
    import tensorflow as tf

    from bert_tf.data.glue import read_examples
    from bert_tf.export.serving_module import SERVING_PAD_MULTIPLE
    from bert_tf.export.text_inputs import pack_texts
    from bert_tf.text.segment_packer import SegmentPacker
    from bert_tf.text.tokenizer import BertTokenizer

    examples = read_examples(task, "dev", shared_data.data_path("glue"))
    if limit:
        examples = examples[:limit]
    tokenizer = BertTokenizer(vocab_file, lower_case=True)
    packer = SegmentPacker.from_tokenizer(tokenizer, max_seq_length,
                                          pad_to_multiple=SERVING_PAD_MULTIPLE)
    batches = []
    for start in range(0, len(examples), BATCH):
        rows = examples[start:start + BATCH]
        texts = [tf.constant([e.text_a for e in rows])]
        if rows[0].text_b is not None:
            texts.append(tf.constant([e.text_b for e in rows]))
        packed = pack_texts(tokenizer, packer, texts)
        feed = {"input_word_ids": packed["token_ids"].numpy(),
                "input_mask": packed["padding_mask"].numpy(),
                "input_type_ids": packed["segment_ids"].numpy()}
        batches.append((feed, [e.label for e in rows]))
    return batches


def variant_functions(paths, threads):
    """{variant: function(feed) -> {output name: np array}} over the four exports."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the exports' text ops)

    from research.benchmarks import onnx_models

    functions = {}
    for variant, name in (("export_ids", "export"), ("export_int8", "export_int8")):
        loaded = tf.saved_model.load(paths[name])
        signature = loaded.signatures["serve_token_ids"]
        functions[variant] = (lambda feed, f=signature, owner=loaded: {
            k: v.numpy() for k, v in f(**{n: tf.constant(a) for n, a in feed.items()}).items()})
    for variant, name in (("ort_fp32", "onnx"), ("ort_int8", "onnx_int8")):
        session = onnx_models.ort_session(os.path.join(paths[name], "model.onnx"), threads)
        names = [output.name for output in session.get_outputs()]
        functions[variant] = (lambda feed, s=session, n=names: dict(zip(n, s.run(None, feed),
                                                                         strict=True)))
    return functions


def score(task, label_names, outputs, labels):
    """The task's dev metric (x100) from the concatenated outputs."""
    import numpy as np

    from bert_tf.tasks.glue_metrics import pearson

    metric, _ = TASKS[task]
    if metric == "pearson":
        return 100 * pearson([float(label) for label in labels], outputs.reshape(-1))
    predicted = [label_names[i] for i in np.argmax(outputs, axis=-1)]
    return 100 * float(np.mean([p == str(label) for p, label in zip(predicted, labels,
                                                                     strict=True)]))


def part_finetuned(args, models, log):
    """Fine-tunes, exports and scores every task of `args.finetune_tasks`."""
    import numpy as np

    from bert_tf.export.onnx_inputs import read_metadata
    from research.benchmarks.serving_runtimes import export_all

    results = {"tasks": {}}
    for task in args.finetune_tasks:
        directory = os.path.join(args.output_dir, "finetuned", task)
        run_dir = os.path.join(directory, "run")
        finetune(task, models.model_dir, run_dir, args.finetune_overrides.get(task, []), log)
        paths = export_all(run_dir, directory, args.max_seq_length, log)
        metadata = read_metadata(paths["onnx"])
        batches = dev_batches(task, models.vocab_file, args.max_seq_length,
                              args.finetune_dev_limit)
        labels = [label for _, batch_labels in batches for label in batch_labels]
        _, output = TASKS[task]
        entry = {"metric": TASKS[task][0], "dev_examples": len(labels), "variants": {}}
        reference = None
        for variant, function in variant_functions(paths, args.ort_threads).items():
            values = np.concatenate([function(feed)[output] for feed, _ in batches])
            reference = values if reference is None else reference
            entry["variants"][variant] = {
                "score": score(task, metadata["label_names"], values, labels),
                "max_abs_diff_to_export_ids": float(np.abs(values - reference).max())}
            log(f"    {task} {variant}: {TASKS[task][0]} "
                f"{entry['variants'][variant]['score']:.2f}")
        results["tasks"][task] = entry
    return results
