"""A corpus too small for the cluster, run as a user runs it: two real workers on localhost.

google-research/bert's `sample_text.txt` (one file, three documents) trains in one
process. On two `multi_worker` workers, with the held-out split, worker 1's share
holds no training document: left alone its input loop would spin inside the first
step while worker 0 waited for it. Both workers must instead stop before a step
with one line each, and exit non-zero, in seconds rather than never.
"""

import time

import pytest
from conftest import start_workers, train_command

pytestmark = [pytest.mark.slow, pytest.mark.long]

# Far below the minutes the hang lasted; two TensorFlow start-ups and one check.
DEADLINE_SECONDS = 240


def test_sample_text_on_two_workers_is_refused_by_both_in_one_line(write_config, shared_file,
                                                                    tmp_path):
    sample = shared_file("corpus", "sample_text.txt")
    config = write_config(data={"train_files": [sample], "eval_holdout_every": 20},
                          runtime={"strategy": "multi_worker"})
    started = time.monotonic()
    workers = start_workers(train_command(config, tmp_path / "run"))
    try:
        outputs = [worker.communicate(timeout=DEADLINE_SECONDS)[0] for worker in workers]
    finally:
        for worker in workers:
            worker.kill()
    seconds = time.monotonic() - started
    for index, (worker, output) in enumerate(zip(workers, outputs, strict=True)):
        assert worker.returncode not in (0, None), f"worker {index}:\n{output[-3000:]}"
        assert "Traceback" not in output, f"worker {index}:\n{output[-3000:]}"
        errors = [line for line in output.splitlines() if line.startswith("error:")]
        assert errors == [
            f"error: input pipeline 1 of 2 (one per worker) gets no training document from "
            f"its share of the 1 corpus file(s) {sample}: each worker needs documents of its "
            "own; give the corpus more documents, or at least 2 files (a worker then reads "
            "files of its own), or train on fewer workers"], f"worker {index}:\n{output[-3000:]}"
        assert "step 1/" not in output  # no step was trained
    print(f"both workers refused the corpus in {seconds:.0f} s")
