"""Resident memory of a long pretraining, step by step: is it flat after warm-up?

    python -m research.bench memory_curve --output_dir runs/memory_curve [--profile ci]

Runs `python -m bert_tf.train` as a user would (BERT-tiny, `--config
pretrain/bert_tiny`, on the study corpus built from the offline texts of
../shared, with evaluation and checkpoints on a study's cadence) and samples
the trainer process's resident memory (`/proc/PID/status`) every
`--sample_seconds`. Each sample gets the step of the newest console line
before it (the progress lines, checkpoints and evaluations), so the curve is
memory against step. The run is flat when every sample from `--warmup_step`
to the last step lies within `--tolerance` of the memory at `--warmup_step`
(issue 31: within 5 % between step 500 and the end).

The verdict is on anonymous resident memory (`RssAnon`: what the process
allocated, where a leak grows). Total resident memory (`VmRSS`) also counts
the resident pages of the shared libraries (`RssFile`, about 0.4 GB of
TensorFlow), which the kernel evicts and reloads as other processes on the
machine need memory: on a shared machine it moves by hundreds of MB without
the process allocating anything. Both are recorded and reported.

Profiles: `full` (3,000 steps, batch 64, checkpoint and evaluation every
250 steps) and `ci` (tiny shapes and a few hundred short loops with a
checkpoint and an evaluation every 10 steps: it exercises every cadence point
many times in about a minute or two).

Writes `results.json`, `samples.jsonl` (one line a sample), `report.md` and
`memory.png` into `--output_dir` (the trainer's `train.log` and its `run/`
model_dir beside them). A rerun finds a finished measurement and only judges
its samples again and rewrites the report; an unfinished one starts over (a
resumed process would not be the long-lived process the curve is about). The
exit code is 0 when memory is flat, 1 when it is not or the trainer failed, 2
on a usage error.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

from research.benchmarks import machine
from tests import shared_data

RUN_DIR = "run"
LOG_FILE = "train.log"
SAMPLES_FILE = "samples.jsonl"
RESULTS_FILE = "results.json"
VOCAB = "vocab/bert-base-uncased-vocab.txt"

# Every setting a profile fixes; command-line options override them one by one.
PROFILES = {
    # Batch 64: the 10,000-sequence shuffle buffer is full by step 160, so step 500
    # (the warm-up point) is past the filling of every input buffer; at batch
    # 16 it filled only around step 625, and that filling showed as growth.
    "full": {
        "config": "pretrain/bert_tiny", "train_steps": 3000, "batch_size": 64,
        "steps_per_loop": 50, "checkpoint_every": 250, "eval_every": 250, "eval_steps": 10,
        "warmup_step": 500, "sample_seconds": 1.0, "overrides": [],
    },
    # BERT-tiny's shapes shrunk further: the steps are cheap, so the cadence points
    # (summaries, checkpoints, evaluations) dominate the run. Anonymous memory rises
    # until about step 100 and then falls by about 30 MB (2026-11-27, three runs), so
    # the judged stretch starts at step 150.
    "ci": {
        "config": "pretrain/bert_tiny", "train_steps": 300, "batch_size": 8,
        "steps_per_loop": 5, "checkpoint_every": 10, "eval_every": 10, "eval_steps": 2,
        "warmup_step": 150, "sample_seconds": 0.25,
        "overrides": ["model.encoder.hidden_size=32", "model.encoder.num_heads=2",
                      "model.encoder.intermediate_size=64", "data.max_seq_length=32",
                      "data.max_predictions_per_seq=5", "data.shuffle_buffer_size=100",
                      "data.documents_per_window=8"],
    },
}

# Console lines of the trainer that carry the step they finished.
_STEP_LINES = (re.compile(r"INFO step (\d+)/\d+ "), re.compile(r"saved checkpoint .*ckpt-(\d+)$"),
               re.compile(r"eval at step (\d+):"))
_FINISHED = re.compile(r"^finished at step (\d+)")


def build_parser():
    """Command-line options (a profile's value where an option is not given)."""
    parser = argparse.ArgumentParser(
        prog="python -m research.bench memory_curve", description=__doc__.split("\n\n")[0])
    parser.add_argument("--output_dir", required=True,
                        help="results, report, plot, the trainer's log and model_dir")
    parser.add_argument("--profile", choices=sorted(PROFILES), default="full")
    run = parser.add_argument_group("the training run (default: the profile's)")
    run.add_argument("--config", help="the trainer's --config (a packaged name or a path)")
    run.add_argument("--train_steps", type=int)
    run.add_argument("--batch_size", type=int, help="trainer.global_batch_size")
    run.add_argument("--steps_per_loop", type=int)
    run.add_argument("--checkpoint_every", type=int)
    run.add_argument("--eval_every", type=int)
    run.add_argument("--eval_steps", type=int)
    run.add_argument("--set", action="append", default=[], dest="extra",
                     help="one more trainer --set override (repeatable)")
    judge = parser.add_argument_group("measurement")
    judge.add_argument("--warmup_step", type=int,
                       help="memory is judged from this step to the end")
    judge.add_argument("--tolerance", type=float, default=0.05,
                       help="the largest allowed relative distance of any sample after "
                            "warm-up from the memory at --warmup_step")
    judge.add_argument("--sample_seconds", type=float)
    return parser


def settings(args):
    """The profile's settings with the options given on the command line applied."""
    chosen = dict(PROFILES[args.profile])
    for key in ("config", "train_steps", "batch_size", "steps_per_loop", "checkpoint_every",
                "eval_every", "eval_steps", "warmup_step", "sample_seconds"):
        value = getattr(args, key)
        if value is not None:
            chosen[key] = value
    chosen["overrides"] = list(chosen["overrides"]) + list(args.extra)
    chosen.update(profile=args.profile, tolerance=args.tolerance)
    if not 0 < chosen["warmup_step"] < chosen["train_steps"]:
        raise ValueError(f"--warmup_step must lie between 0 and --train_steps "
                         f"({chosen['train_steps']}), got {chosen['warmup_step']}")
    return chosen


def trainer_command(chosen, corpus, model_dir):
    """The `python -m bert_tf.train` command line of the measured run."""
    vocab = shared_data.data_path(VOCAB)
    if not os.path.isfile(vocab):
        raise FileNotFoundError(f"vocabulary {vocab} does not exist (set BERT_TF_DATA to the "
                                "shared data folder)")
    with open(vocab, encoding="utf-8") as f:
        vocab_size = sum(1 for line in f if line.rstrip("\n"))
    steps = chosen["train_steps"]
    overrides = [
        f"data.train_files={json.dumps(corpus.train_files)}",
        f"data.eval_files={json.dumps(corpus.heldout_files)}",
        f"data.vocab_file={json.dumps(vocab)}",
        f"model.encoder.vocab_size={vocab_size}",
        f"trainer.train_steps={steps}",
        f"trainer.global_batch_size={chosen['batch_size']}",
        f"trainer.steps_per_loop={chosen['steps_per_loop']}",
        f"trainer.checkpoint_every={chosen['checkpoint_every']}",
        f"trainer.eval_every={chosen['eval_every']}",
        f"trainer.eval_steps={chosen['eval_steps']}",
        # The preset's schedule is for 1M steps: warm up over the first tenth of this run.
        f"optimizer.warmup_steps={max(1, steps // 10)}",
        f"optimizer.decay_steps={steps}",
        *chosen["overrides"],
    ]
    command = [sys.executable, "-m", "bert_tf.train", "--config", chosen["config"],
               "--model_dir", model_dir]
    for override in overrides:
        command += ["--set", override]
    return command


# Sample keys and the /proc/PID/status fields they read (all in kB there, MB here).
MEMORY_FIELDS = {"rss_mb": "VmRSS", "anon_mb": "RssAnon", "file_mb": "RssFile",
                 "hwm_mb": "VmHWM"}


def read_memory(pid):
    """`{"rss_mb", "anon_mb", "file_mb", "hwm_mb"}` of process `pid`, or None when it is gone.

    `rss_mb` (VmRSS) is `anon_mb` (RssAnon: the heap, tensors, Python objects)
    plus `file_mb` (RssFile: the mapped pages of the shared libraries, which
    the kernel drops and reloads as other processes need memory) plus shared
    memory; `hwm_mb` is the peak of VmRSS so far.
    """
    try:
        with open(f"/proc/{pid}/status") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
    except OSError:
        return None
    try:
        return {key: round(int(fields[field].split()[0]) / 1024, 1)
                for key, field in MEMORY_FIELDS.items()}
    except (KeyError, ValueError, IndexError):
        return None  # a zombie has no VmRSS


def step_of_line(line):
    """The step a trainer console line reports finished, or None."""
    for pattern in _STEP_LINES:
        found = pattern.search(line.rstrip())
        if found:
            return int(found.group(1))
    return None


class _ConsoleReader(threading.Thread):
    """Copies the trainer's console into the log and keeps the newest step it reported.

    Args:
      stream: the trainer's console.
      log_file: where the console is copied.
      on_new_step: called with each newly reported step, as soon as its line arrives (the
        last steps can come and the trainer end within one sampling period).
    """

    def __init__(self, stream, log_file, on_new_step):
        super().__init__(daemon=True)
        self.stream, self.log_file = stream, log_file
        self.on_new_step = on_new_step
        self.step = 0
        self.finished = False

    def run(self):
        for line in self.stream:
            self.log_file.write(line)
            self.log_file.flush()
            step = step_of_line(line)
            if step is not None and step > self.step:
                self.step = step
                self.on_new_step(step)
            if _FINISHED.match(line):
                self.finished = True


def measure(command, output_dir, sample_seconds, log=print):
    """Runs `command` and samples its resident memory until it exits.

    Args:
      command: the trainer's command line.
      output_dir: where `train.log` and `samples.jsonl` are written.
      sample_seconds: the sampling period.
      log: called with progress lines.

    Returns:
      `(exit code, samples)`; a sample is `{"t", "step", **read_memory(pid)}` with `t`
      in seconds from the start and `step` the newest step the trainer reported;
      samples taken after its final line (while it shuts down) are left out.
    """
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    samples = []
    with open(os.path.join(output_dir, LOG_FILE), "w", encoding="utf-8") as log_file, \
            open(os.path.join(output_dir, SAMPLES_FILE), "w", encoding="utf-8") as out:
        log_file.write("$ " + " ".join(command) + "\n")
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True, env=env)
        start, last_report = time.monotonic(), 0
        lock = threading.Lock()

        def take_sample(step):
            memory = read_memory(process.pid)
            if memory is None:
                return None
            sample = {"t": round(time.monotonic() - start, 2), "step": step, **memory}
            with lock:
                samples.append(sample)
                out.write(json.dumps(sample) + "\n")
                out.flush()
            return sample

        reader = _ConsoleReader(process.stdout, log_file, take_sample)
        reader.start()
        try:
            while process.poll() is None:
                sample = None if reader.finished else take_sample(reader.step)
                if sample is not None and sample["step"] >= last_report + 250:
                    last_report = sample["step"]
                    log(f"step {sample['step']}: resident {sample['rss_mb']:.0f} MB, "
                        f"anonymous {sample['anon_mb']:.0f} MB")
                time.sleep(sample_seconds)
        finally:
            if process.poll() is None:
                process.terminate()
            process.wait()
            reader.join(timeout=10)
    return process.returncode, samples


def _write_json(path, data):
    with open(path + ".tmp", "w") as f:
        json.dump(data, f, indent=1)
    os.replace(path + ".tmp", path)


def run(args, log=print):
    """Measures (unless `output_dir` holds a finished measurement); returns the results."""
    from research.studies import corpus as corpus_lib

    chosen = settings(args)
    os.makedirs(args.output_dir, exist_ok=True)
    path = os.path.join(args.output_dir, RESULTS_FILE)
    finished = _finished(args.output_dir, chosen)
    if finished is not None:
        log(f"== memory_curve: done (in {path})")
        return _publish(finished, args.output_dir)
    corpus = corpus_lib.build_corpus(os.path.join(args.output_dir, "corpus"))
    model_dir = os.path.join(args.output_dir, RUN_DIR)
    # A memory curve is one process's: an interrupted run starts over.
    shutil.rmtree(model_dir, ignore_errors=True)
    command = trainer_command(chosen, corpus, model_dir)
    log(f"== memory_curve: training {chosen['train_steps']} steps "
        f"(log: {os.path.join(args.output_dir, LOG_FILE)})")
    started = time.time()
    code, samples = measure(command, args.output_dir, chosen["sample_seconds"], log)
    results = _publish({
        "settings": chosen,
        "date": time.strftime("%Y-%m-%d", time.gmtime(started)),
        "machine": machine.describe(),
        "command": command,
        "exit_code": code,
        "seconds": round(time.time() - started, 1),
        "complete": code == 0 and bool(samples),
        "cadence": cadence_steps(chosen),
        "samples": samples,
    }, args.output_dir)
    if code != 0:
        raise RuntimeError(f"the trainer exited with code {code}; see "
                           f"{os.path.join(args.output_dir, LOG_FILE)}")
    return results


def read_samples(output_dir):
    """The samples of `output_dir/samples.jsonl` (one JSON object a line)."""
    with open(os.path.join(output_dir, SAMPLES_FILE), encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _finished(output_dir, chosen):
    """The results of a finished measurement with the same settings, samples read back; or None."""
    path = os.path.join(output_dir, RESULTS_FILE)
    if not (os.path.isfile(path) and os.path.isfile(os.path.join(output_dir, SAMPLES_FILE))):
        return None
    with open(path) as f:
        results = json.load(f)
    if not (results.get("complete") and results.get("settings") == chosen):
        return None
    results["samples"] = read_samples(output_dir)
    return results


def _publish(results, output_dir):
    """Judges the samples; writes `results.json` (without them) and the report."""
    from research.benchmarks import memory_curve_report

    results["verdict"] = memory_curve_report.judge(results["samples"], results["settings"])
    results["verdict_rss"] = memory_curve_report.judge(results["samples"], results["settings"],
                                                       key="rss_mb")
    _write_json(os.path.join(output_dir, RESULTS_FILE),
                {k: v for k, v in results.items() if k != "samples"})
    memory_curve_report.write_report(results, output_dir)
    return results


def cadence_steps(chosen):
    """The steps where the trainer checkpoints and evaluates."""
    steps = chosen["train_steps"]
    return {"checkpoint": list(range(chosen["checkpoint_every"], steps + 1,
                                     chosen["checkpoint_every"])),
            "eval": list(range(chosen["eval_every"], steps + 1, chosen["eval_every"]))}


def main(argv=None):
    """Command-line entry point; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        results = run(args, log=lambda m: print(m, flush=True))
    except (ValueError, FileNotFoundError, RuntimeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2 if not isinstance(error, RuntimeError) else 1
    print(open(os.path.join(args.output_dir, "report.md")).read())
    return 0 if results["verdict"]["flat"] else 1


if __name__ == "__main__":
    sys.exit(main())
