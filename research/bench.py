"""Benchmarks: `python -m research.bench NAME [options]` (NAME: one of `BENCHMARKS`).

Each benchmark measures a peer in the same run where one exists and reports
ratios, because these machines are shared and absolute numbers are noisy.
`python -m research.bench NAME --help` lists a benchmark's options.
"""

import importlib
import sys

BENCHMARKS = {
    "tokenizer": ("research.benchmarks.tokenizer",
                  "in-graph WordPiece vs Hugging Face tokenizers, sentences/s"),
    "pipeline": ("research.benchmarks.pipeline",
                 "dynamic pretraining pipeline, tokens/s and sequences/s"),
    "train": ("research.benchmarks.train",
              "pretraining train step vs Model Garden BertPretrainerV2, sequences/s"),
    "serve": ("research.benchmarks.serve",
              "raw-text classifier SavedModel vs Model Garden, texts/s and latency"),
    "serving_runtimes": ("research.benchmarks.serving_runtimes",
                         "MiniLM export vs ONNX Runtime fp32 and int8, sentences/s and quality"),
    "packing": ("research.benchmarks.packing",
                "packed rows vs padded ones on real data: pretraining, fine-tuning, serving"),
    "parity": ("research.benchmarks.parity",
               "step-for-step training parity with Model Garden BertPretrainerV2"),
    "lost_worker": ("research.benchmarks.lost_worker",
                    "seconds from SIGKILL of a multi-worker worker to the survivor's exit"),
    "serving_profile": ("research.benchmarks.serving_profile",
                        "where one batch-1 request's time goes: ops, op types, tokenizer"),
    "serving_latency": ("research.benchmarks.serving_latency",
                        "p50/p99 latency of a MiniLM export, batch 1 and 32, 1 and 8 threads"),
    "memory_curve": ("research.benchmarks.memory_curve",
                     "resident memory of a 3,000-step pretraining against step: flat?"),
    "conversion_matrix": ("research.benchmarks.conversion_matrix",
                          "every pair of the five checkpoint formats on MiniLM: max abs diff"),
    "demo_recipe": ("research.benchmarks.demo_recipe",
                    "the main job's recipe change by change: held-out MLM and NSP accuracy"),
}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in BENCHMARKS:
        width = max(map(len, BENCHMARKS))
        lines = [f"  {name:{width}s}  {what}" for name, (_, what) in BENCHMARKS.items()]
        print("usage: python -m research.bench NAME [options]\n\nbenchmarks:\n" + "\n".join(lines),
              file=sys.stderr)
        return 2
    module = importlib.import_module(BENCHMARKS[argv[0]][0])
    return module.main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
