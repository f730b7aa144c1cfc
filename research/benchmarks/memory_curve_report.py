"""Verdict, `report.md` and `memory.png` of the memory curve (`benchmarks.memory_curve`)."""

import os

import numpy as np


def _median(values):
    return float(np.median(values)) if len(values) else None


def judge(samples, chosen, key="anon_mb"):
    """Whether resident memory stays flat from `chosen["warmup_step"]` to the end.

    The memory at the warm-up step is the median of the samples taken while
    the first step the trainer reported at or after it was the newest (a
    loop's worth of samples). Every later sample must lie within
    `chosen["tolerance"]` of it.

    Args:
      samples: the measurement's samples (`step`, `rss_mb`, `anon_mb`, ...).
      chosen: the run's settings (`warmup_step`, `train_steps`, `tolerance`).
      key: the sampled memory judged (`anon_mb`: anonymous, `rss_mb`: total).

    Returns:
      A dict: `flat` (None when the run never reached the warm-up step), the
      memory at the warm-up step (`warmup_mb`), at the end (`end_mb`: the
      median over the last loop), the `min_mb`/`max_mb` after warm-up, their
      relative distances, a least-squares `slope_mb_per_1000_steps`, and the
      first (`start_mb`) and highest (`peak_mb`) memory of the whole run.
    """
    warmup, tolerance = chosen["warmup_step"], chosen["tolerance"]
    after = [s for s in samples if s["step"] >= warmup]
    verdict = {"flat": None, "memory": key, "tolerance": tolerance, "warmup_step": warmup,
               "samples": len(samples), "samples_after_warmup": len(after)}
    running = [s for s in samples if s["step"] >= 1]
    if running:
        verdict["start_mb"] = running[0][key]
        verdict["peak_mb"] = max(s[key] for s in samples)
    if not after:
        return verdict
    first = after[0]["step"]
    baseline = _median([s[key] for s in after if s["step"] == first])
    last_loop = chosen["train_steps"] - chosen["steps_per_loop"]
    end = _median([s[key] for s in after if s["step"] >= last_loop]) or after[-1][key]
    values = np.array([s[key] for s in after])
    steps = np.array([s["step"] for s in after], np.float64)
    slope = (float(np.polyfit(steps, values, 1)[0]) * 1000
             if len(set(steps.tolist())) > 1 else 0.0)
    deviation = float(np.max(np.abs(values / baseline - 1)))
    # The highest, not the last: the console reader samples each new step as its line
    # arrives, so a periodic sample of the step before can be appended after it.
    reached = int(steps.max())
    verdict.update(
        flat=bool(deviation <= tolerance and reached >= chosen["train_steps"]),
        reached_step=reached,
        warmup_mb=baseline, end_mb=end, min_mb=float(values.min()), max_mb=float(values.max()),
        end_change=end / baseline - 1, max_deviation=deviation,
        min_change=float(values.min()) / baseline - 1,
        max_change=float(values.max()) / baseline - 1,
        slope_mb_per_1000_steps=slope)
    return verdict


LABELS = {"anon_mb": "anonymous (RssAnon)", "rss_mb": "total (VmRSS)",
          "file_mb": "shared libraries and files (RssFile)"}


def memory_by_step(samples, steps, key="anon_mb"):
    """`{step: median MB}` of the samples taken while each of `steps` was the newest step."""
    by_step = {}
    for sample in samples:
        by_step.setdefault(sample["step"], []).append(sample[key])
    return {step: _median(by_step[step]) for step in steps if step in by_step}


def plot(results, path):
    """Resident memory against step, with the tolerance band of the judged memory."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples, verdict = results["samples"], results["verdict"]
    period = results["settings"]["sample_seconds"]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    steps = [s["step"] for s in samples]
    for key, color in (("rss_mb", "tab:blue"), ("anon_mb", "tab:orange"),
                       ("file_mb", "tab:grey")):
        ax.plot(steps, [s[key] for s in samples], lw=0.8, color=color, marker=".", ms=2,
                label=LABELS[key])
    if verdict.get("warmup_mb"):
        base, tol = verdict["warmup_mb"], verdict["tolerance"]
        end = results["settings"]["train_steps"]
        ax.fill_between([verdict["warmup_step"], end], base * (1 - tol), base * (1 + tol),
                        color="tab:green", alpha=0.2,
                        label=f"+-{tol:.0%} of anonymous at step {verdict['warmup_step']}")
    for step in results["cadence"]["eval"]:
        ax.axvline(step, color="grey", lw=0.4, alpha=0.5)
    ax.set_xlabel("step (grey lines: checkpoint and evaluation)")
    ax.set_ylabel("MB")
    ax.set_ylim(bottom=0)
    ax.set_title(f"Trainer process resident memory against step (a sample every {period:g} s)")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _mb(value):
    return "-" if value is None else f"{value:.0f} MB"


def _pair(v, w, key):
    return f"{_mb(v.get(key))} | {_mb(w.get(key))}"


def _changes(v):
    if not v.get("warmup_mb"):
        return "not reached"
    return (f"end {100 * v['end_change']:+.2f} %, range {100 * v['min_change']:+.2f} % to "
            f"{100 * v['max_change']:+.2f} %, trend {v['slope_mb_per_1000_steps']:+.2f} MB "
            "per 1,000 steps")


def write_report(results, output_dir):
    """Writes `report.md` and `memory.png` from `results`."""
    s, v, m = results["settings"], results["verdict"], results["machine"]
    w = results["verdict_rss"]
    lines = [
        "# Resident memory of a long pretraining",
        "",
        f"`python -m bert_tf.train --config {s['config']}`: {s['train_steps']} steps at "
        f"batch {s['batch_size']}, {s['steps_per_loop']} steps per loop, a checkpoint every "
        f"{s['checkpoint_every']} and an evaluation ({s['eval_steps']} batches) every "
        f"{s['eval_every']} steps, on the study corpus (profile `{s['profile']}`"
        + (f"; overrides {', '.join(f'`{o}`' for o in s['overrides'])}" if s["overrides"]
           else "") + ").",
        f"{results['date']}, {m['cpus']} x {m['cpu']} (load {m['load_average']:.2f} at the "
        f"start), {results['seconds'] / 60:.1f} min, {v['samples']} samples of "
        f"/proc/PID/status every {s['sample_seconds']:g} s.",
        "",
        "| | anonymous (RssAnon) | total (VmRSS) |",
        "|---|---|---|",
        f"| first step | {_pair(v, w, 'start_mb')} |",
        f"| step {v['warmup_step']} (warm-up) | {_pair(v, w, 'warmup_mb')} |",
        f"| end (last loop) | {_pair(v, w, 'end_mb')} |",
        f"| min after warm-up | {_pair(v, w, 'min_mb')} |",
        f"| max after warm-up | {_pair(v, w, 'max_mb')} |",
        f"| peak of the run | {_pair(v, w, 'peak_mb')} |",
        "",
        f"Against step {v['warmup_step']}, anonymous: {_changes(v)}. Total: {_changes(w)}.",
        "Anonymous memory is what the trainer allocated; the total adds the resident pages of "
        "the shared libraries, which the kernel evicts and reloads as other processes need "
        "memory, so on a shared machine it moves without the trainer allocating anything.",
    ]
    at_cadence = memory_by_step(results["samples"], results["cadence"]["eval"])
    if at_cadence:
        lines += ["", "Anonymous memory (median MB) while each checkpoint and evaluation step "
                  "was the newest:", "",
                  "| step | " + " | ".join(str(step) for step in at_cadence) + " |",
                  "|---|" + "---|" * len(at_cadence),
                  "| MB | " + " | ".join(f"{mb:.0f}" for mb in at_cadence.values()) + " |"]
    lines += ["", "![resident memory against step](memory.png)", ""]
    if not results["complete"]:
        lines += [f"**Unfinished: the trainer exited with code {results['exit_code']} (see "
                  "train.log); rerun the same command to measure again.**", ""]
    verdict = {True: "flat", False: "NOT FLAT", None: "not measured"}[v["flat"]]
    lines += [f"**Anonymous memory after step {v['warmup_step']}: {verdict} (tolerance "
              f"{100 * v['tolerance']:g} %).**", ""]
    with open(os.path.join(output_dir, "report.md"), "w") as f:
        f.write("\n".join(lines))
    if results["samples"]:
        plot(results, os.path.join(output_dir, "memory.png"))
