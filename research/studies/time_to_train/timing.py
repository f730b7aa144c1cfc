"""Every recipe's time per step, measured in one short run on one machine.

The CPU changes between sessions, so timings are never mixed: one
invocation (`--timing_only`) measures every phase of every recipe and writes
`timing.json` only when all are measured; a new invocation starts over. Each
phase trains `timing.steps` steps from fresh weights in `timing/` (no
held-out evaluation but one batch at the end, a checkpoint only at the end);
its time per step is the median over its training loops of the trainer's own
`steps_per_second`, leaving out the first loop (tracing, pipeline warm-up).
Evaluation time is not counted, as the benchmark counts training only.
"""

import json
import os
import platform
import shutil
import statistics
import subprocess
import time

from research.studies import scalars, units

TIMING_FILE = "timing.json"
TIMING_DIR = "timing"


def _cpu_model():
    try:
        output = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    except OSError:
        return platform.processor()
    for line in output.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def read(out_dir: str) -> dict | None:
    """The benchmark's `timing.json`, or None before a timing run finished."""
    path = os.path.join(out_dir, TIMING_FILE)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def seconds_per_step(train_curves: dict, first_loop_end: int) -> tuple[float, list[float]]:
    """(median seconds per step, each loop's) over the loops after `first_loop_end`.

    Args:
      train_curves: a run's training scalars (`scalars.read(run)["train"]`).
      first_loop_end: the step that ends the untimed first loop.
    """
    rates = [rate for step, rate in train_curves.get("steps_per_second", [])
             if step > first_loop_end and rate > 0]
    if not rates:
        raise ValueError("no timed training loop after the first one")
    loops = [1.0 / rate for rate in rates]
    return statistics.median(loops), loops


def measure(benchmark, log=print) -> dict:
    """Times every phase of every recipe (all of them, in one run) and writes timing.json.

    Args:
      benchmark: a `runner.Benchmark`.
      log: a function taking one line of progress.
    """
    spec = benchmark.spec
    timing_dir = os.path.join(benchmark.out_dir, TIMING_DIR)
    if os.path.isdir(timing_dir):
        shutil.rmtree(timing_dir)  # never mix timings of two invocations
    loop = spec.timing.steps_per_loop
    extra = [f"trainer.train_steps={spec.timing.steps}", f"trainer.steps_per_loop={loop}",
             f"trainer.checkpoint_every={spec.timing.steps}", "trainer.eval_every=0",
             "trainer.eval_steps=1"]
    started = time.time()
    load_before = os.getloadavg()[0]
    phases = {}
    # Replicates differ in seeds only: each recipe is timed once, on its first row.
    for recipe in (r for r in spec.recipes if spec.replicates(r.group)[0] is r):
        for phase in recipe.phases:
            name = f"{recipe.name}/{phase.name}"
            model_dir = os.path.join(timing_dir, recipe.name, phase.name)
            os.makedirs(model_dir, exist_ok=True)
            command = benchmark._command(recipe, phase, None, extra)
            command[command.index("--model_dir") + 1] = model_dir
            log(f"timing {name}: {spec.timing.steps} steps")
            with open(os.path.join(model_dir, units.LOG_FILE), "w", encoding="utf-8") as f:
                env = dict(os.environ, PYTHONUNBUFFERED="1")
                env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
                code = subprocess.run(command, stdout=f, stderr=subprocess.STDOUT,
                                      env=env).returncode
            if code != 0:
                raise units.UnitFailedError(f"timing of {name} failed with exit code {code}; "
                                            f"see {os.path.join(model_dir, units.LOG_FILE)}")
            median, loops = seconds_per_step(scalars.read(model_dir)["train"], loop)
            phases[name] = {"seconds_per_step": median, "loop_seconds_per_step": loops}
            log(f"timing {name}: {median:.3f} s/step")
    timing = {
        "machine": {"cpu": _cpu_model(), "cpu_count": os.cpu_count(),
                    "load_average_before": round(load_before, 2),
                    "load_average_after": round(os.getloadavg()[0], 2)},
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "minutes": round((time.time() - started) / 60, 1),
        "steps": spec.timing.steps, "steps_per_loop": loop, "phases": phases}
    path = os.path.join(benchmark.out_dir, TIMING_FILE)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(timing, f, indent=2)
    os.replace(path + ".tmp", path)
    return timing
