"""How long the survivors of a multi-worker run take to stop when a worker is killed outright.

    python -m research.bench lost_worker --output_dir runs/lost_worker \\
        [--timeouts 10,5] [--victims 1,0] [--signals KILL,STOP] [--repeats 2]

Each trial starts two `multi_worker` workers on localhost (TF_CONFIG, free
ports) training bert_tiny (sequence length 32, batch 8) on real text, waits
until the survivor has logged step `--kill_after_step` (checkpoints are
written every 4 steps), sends the victim the signal and times the survivor
from the signal to its exit. Per trial it records the seconds, the exit
code (75: `LOST_WORKER_EXIT_CODE`) and the survivor's one error line.

- SIGKILL: the process dies and its machine stays up (no SIGTERM, so
  TensorFlow's preemption handling never runs). Its closed connections can
  tell the survivor at once, when it next talks to the victim.
- SIGSTOP: the process freezes with its connections open, as when a
  machine vanishes: only the missing heartbeats tell. This is the bound:
  victim 1 is noticed by the coordination service in worker 0 after
  `runtime.worker_timeout_seconds` (checked once a second); for victim 0,
  the coordination leader, the survivor's own heartbeat to it fails after
  the same timeout.

Writes `results.json` and `report.md` into `--output_dir`; the exit code is
0 when every survivor exited with code 75 within the timeout plus
`--slack_seconds`, 1 otherwise.
"""

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time

from bert_tf.training.exit_codes import LOST_WORKER_EXIT_CODE
from research.benchmarks import machine
from tests import shared_data
from tests.ports import free_ports

TRAINER = {"global_batch_size": 8, "steps_per_loop": 2, "checkpoint_every": 4,
           "eval_every": 0, "train_steps": 1000}
MODEL = {"model.encoder.max_position_embeddings": 64, "data.max_seq_length": 32,
         "data.max_predictions_per_seq": 5, "data.documents_per_window": 8,
         "data.shuffle_buffer_size": 64, "optimizer.warmup_steps": 4}


def build_parser():
    """Command-line options of the benchmark."""
    parser = argparse.ArgumentParser(prog="python -m research.bench lost_worker",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--output_dir", required=True, help="results.json, report.md, runs")
    parser.add_argument("--timeouts", default="10,5",
                        help="comma-separated runtime.worker_timeout_seconds (10: the default)")
    parser.add_argument("--victims", default="1,0",
                        help="comma-separated worker indices to kill (0: the coordination "
                             "leader)")
    parser.add_argument("--signals", default="KILL,STOP",
                        help="comma-separated signals that lose the victim (KILL, STOP)")
    parser.add_argument("--repeats", type=int, default=2,
                        help="trials per timeout, victim and signal")
    parser.add_argument("--kill_after_step", type=int, default=10)
    parser.add_argument("--slack_seconds", type=float, default=3.0,
                        help="the stated bound is the timeout plus this")
    parser.add_argument("--corpus", default=shared_data.data_path("corpus", "sotu"),
                        help="folder of prose documents (one per file)")
    parser.add_argument("--vocab_file",
                        default=shared_data.data_path("vocab", "bert-base-uncased-vocab.txt"))
    return parser


def prepare_corpus(source, output_dir):
    """BERT's corpus format (a sentence per line) of `source`'s last 20 documents."""
    from bert_tf.data.sentence_split import write_sentence_per_line

    folder = os.path.join(output_dir, "corpus")
    if not os.path.isdir(folder):
        os.makedirs(folder)
        names = sorted(os.listdir(source))[-20:]
        write_sentence_per_line([os.path.join(source, name) for name in names], folder)
    return os.path.join(folder, "*.txt")


def train_command(args, corpus, model_dir, timeout):
    overrides = {"data.train_files": f'["{corpus}"]', "data.vocab_file": args.vocab_file,
                 "runtime.worker_timeout_seconds": timeout, **MODEL,
                 **{f"trainer.{key}": value for key, value in TRAINER.items()}}
    command = [sys.executable, "-m", "bert_tf.train", "--config", "pretrain/bert_tiny",
               "--model_dir", model_dir, "--strategy", "multi_worker"]
    for key, value in overrides.items():
        command += ["--set", f"{key}={value}"]
    return command


def trial(args, corpus, model_dir, timeout, victim, signal_name):
    """Sends worker `victim` SIG`signal_name` mid-run; returns what the survivor did."""
    workers = [f"localhost:{port}" for port in free_ports(2)]
    processes = []
    for index in range(2):
        tf_config = json.dumps({"cluster": {"worker": workers},
                                "task": {"type": "worker", "index": index}})
        env = dict(os.environ, TF_CONFIG=tf_config, TF_CPP_MIN_LOG_LEVEL="2",
                   PYTHONUNBUFFERED="1")
        processes.append(subprocess.Popen(train_command(args, corpus, model_dir, timeout),
                                          env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True))
    survivor = processes[1 - victim]
    output, reached = [], False
    for line in survivor.stdout:
        output.append(line)
        found = re.search(r"step (\d+)/\d+", line)
        if found and int(found.group(1)) >= args.kill_after_step:
            reached = True
            break
    processes[victim].send_signal(getattr(signal, f"SIG{signal_name}"))
    lost = time.monotonic()
    output.append(survivor.communicate(timeout=timeout + 300)[0])
    seconds = time.monotonic() - lost
    processes[victim].kill()  # a stopped victim too
    processes[victim].wait()
    with open(os.path.join(model_dir, "survivor.log"), "w") as f:
        f.write("".join(output))
    errors = [line for line in "".join(output).splitlines() if line.startswith("error:")]
    # A survivor that stopped before the victim was signalled took a live worker for lost.
    return {"stopped_before_signal": not reached, "timeout": timeout, "victim": victim,
            "signal": signal_name, "seconds": round(seconds, 2),
            "exit_code": survivor.returncode, "error_lines": errors,
            "traceback": "Traceback" in "".join(output)}


def summarize(trials, slack):
    """{"timeout/victim": summary} over the trials."""
    groups = {}
    for record in trials:
        key = f"{record['timeout']}/{record['victim']}/{record['signal']}"
        groups.setdefault(key, []).append(record)
    summary = {}
    for key, records in groups.items():
        seconds = [r["seconds"] for r in records]
        bound = records[0]["timeout"] + slack
        summary[key] = {"timeout": records[0]["timeout"], "victim": records[0]["victim"],
                        "signal": records[0]["signal"],
                        "trials": len(records), "min": min(seconds),
                        "median": statistics.median(seconds), "max": max(seconds),
                        "bound": bound,
                        "ok": all(r["exit_code"] == LOST_WORKER_EXIT_CODE and not r["traceback"]
                                  and not r.get("stopped_before_signal")
                                  and len(r["error_lines"]) == 1 and r["seconds"] <= bound
                                  for r in records)}
    return summary


def write_report(results, output_dir):
    lines = ["# Lost-worker benchmark", "",
             "Written by `python -m research.bench lost_worker`: seconds from the signal that "
             "loses one of two `multi_worker` workers on localhost to the survivor's exit (code "
             "75, one error line), per `runtime.worker_timeout_seconds`, victim and signal "
             "(SIGSTOP: the victim freezes with its connections open, as a vanished machine).",
             "",
             "| worker_timeout_seconds | lost | signal | trials | min s | median s | max s | "
             "bound (timeout + slack) | all exit 75 with one line, within bound |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in results["summary"].values():
        victim = ("worker 0 (coordination leader)" if row["victim"] == 0
                  else f"worker {row['victim']}")
        lines.append(f"| {row['timeout']} | {victim} | SIG{row['signal']} | {row['trials']} | "
                     f"{row['min']:.1f} | "
                     f"{row['median']:.1f} | {row['max']:.1f} | {row['bound']:g} | "
                     f"{'yes' if row['ok'] else 'NO'} |")
    machine = results["machine"]
    lines += ["", f"({machine['cpus']} x {machine['cpu']}, load {machine['load_average']:.2f} "
              f"at the end, {results['wall_seconds']:.0f} s, {results['date']})", "",
              "A survivor's error line (first trial):", "", "```",
              results["trials"][0]["error_lines"][0] if results["trials"][0]["error_lines"]
              else "(none)", "```", ""]
    with open(os.path.join(output_dir, "report.md"), "w") as f:
        f.write("\n".join(lines))


def run(args, log=print):
    """Runs every trial; returns the results (also written to `--output_dir`)."""
    timeouts = [int(t) for t in args.timeouts.split(",")]
    victims = [int(v) for v in args.victims.split(",")]
    signals = [name.strip().upper() for name in args.signals.split(",")]
    if any(v not in (0, 1) for v in victims):
        raise ValueError(f"--victims must name workers 0 and/or 1, got {args.victims!r}")
    if any(name not in ("KILL", "STOP") for name in signals):
        raise ValueError(f"--signals must be KILL and/or STOP, got {args.signals!r}")
    os.makedirs(args.output_dir, exist_ok=True)
    corpus = prepare_corpus(args.corpus, args.output_dir)
    start, trials = time.time(), []
    for timeout in timeouts:
        for signal_name in signals:
            for victim in victims:
                for repeat in range(args.repeats):
                    model_dir = os.path.join(args.output_dir, "runs",
                                             f"t{timeout}_{signal_name}{victim}_{repeat}")
                    record = trial(args, corpus, model_dir, timeout, victim, signal_name)
                    log(f"timeout {timeout}s, SIG{signal_name} to worker {victim}: survivor "
                        f"exited {record['exit_code']} after {record['seconds']:.1f}s")
                    trials.append(record)
    settings = ("timeouts", "victims", "signals", "repeats", "kill_after_step", "slack_seconds")
    results = {"settings": {key: getattr(args, key) for key in settings},
               "trials": trials, "summary": summarize(trials, args.slack_seconds),
               "machine": machine.describe(), "wall_seconds": time.time() - start,
               "date": time.strftime("%Y-%m-%d", time.gmtime())}
    with open(os.path.join(args.output_dir, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    write_report(results, args.output_dir)
    return results


def main(argv=None):
    """Entry point of `python -m research.bench lost_worker`."""
    args = build_parser().parse_args(argv)
    try:
        results = run(args, log=lambda m: print(m, flush=True))
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(open(os.path.join(args.output_dir, "report.md")).read())
    return 0 if all(row["ok"] for row in results["summary"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
