"""`report.md` and the PNG plots of the parity harness (`research.benchmarks.parity`)."""

import os

import numpy as np


def schedule_table(config, steps=None):
    """Learning rates of ours, Model Garden's factory and google-research/bert around warmup.

    Both stacks train on ours (the harness compares optimizers, not
    schedules); this table shows what each project's own schedule would give.
    """
    from research.benchmarks.parity_stacks import (
        garden_schedule,
        google_bert_learning_rate,
        our_schedule,
    )

    warmup = config.warmup_steps
    steps = steps or sorted({0, 1, warmup - 1, warmup, warmup + 1, config.decay_steps - 1})
    ours, garden = our_schedule(config), garden_schedule(config)
    return [{"step": s, "ours": float(ours(s)), "garden": float(garden(s)),
             "google_bert": google_bert_learning_rate(config, s)}
            for s in steps if s >= 0]


def _plot_exact(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    verdicts = results["exact"]["verdicts"]
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, verdict in verdicts.items():
        gaps = np.maximum(np.asarray(verdict["gaps"]["loss"]), 1e-12)
        ax.semilogy(np.arange(1, len(gaps) + 1), gaps, label=f"{name} vs Garden")
    ax.axhline(results["settings"]["loss_rtol"], color="k", ls="--", lw=1, label="tolerance")
    ax.set_xlabel("step")
    ax.set_ylabel("|total loss gap| / Garden loss")
    ax.set_title("Dropout off: per-step total loss, relative gap to Model Garden")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _plot_dropout(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from research.benchmarks.parity import trailing_mean

    window = results["settings"]["smoothing"]
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, color in (("ours", "tab:blue"), ("garden", "tab:orange")):
        mlm = results["dropout"]["losses"][name]["mlm_loss"]
        steps = np.arange(1, len(mlm) + 1)
        ax.plot(steps, mlm, color=color, alpha=0.2, lw=0.5)
        label = "bert_tf" if name == "ours" else "Model Garden"
        ax.plot(steps, trailing_mean(mlm, window), color=color,
                label=f"{label} ({window}-step mean)")
    ax.set_xlabel("step")
    ax.set_ylabel("MLM loss")
    ax.set_title("Dropout on: MLM loss, same batches and initial weights")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _verdict_row(name, v):
    return (f"| {name} | {v['max_loss_rel_gap']:.2e} | {v['first_step_over_loss_rtol'] or '-'} "
            f"| {v['max_weight_abs_diff']:.2e} (`{v['worst_weight']}`) "
            f"| {'parity' if v['parity'] else 'DIVERGES'} |")


def _so_far(results):
    """Every finished check passes (for a report written mid-run)."""
    fine = results["exact"]["verdicts"]["ours"]["parity"]
    return fine and results.get("dropout", {}).get("verdict", {}).get("parity", True)


def write_report(results, output_dir):
    """Writes `report.md`, `exact_losses.png` and (with the dropout part) `dropout_mlm.png`."""
    settings = results["settings"]
    encoder = results["encoder"]
    exact = results["exact"]
    lines = [
        "# Parity with Model Garden",
        "",
        f"Encoder L{encoder['num_layers']}/H{encoder['hidden_size']}/A{encoder['num_heads']}, "
        f"vocab {encoder['vocab_size']}, `{encoder['hidden_act']}`, fp32; batch "
        f"{settings['batch_size']} x seq {settings['seq_length']}, "
        f"{settings['max_predictions']} predictions; peak learning rate "
        f"{settings['learning_rate']}, linear warmup over {settings['warmup_fraction']:.0%} of "
        "each part then linear decay to 0 (our schedule on both stacks).",
        "",
        f"## Dropout off, {exact['steps']} steps",
        "",
        f"Tolerances: losses {settings['loss_rtol']:g} relative per step; every weight "
        f"element {settings['weight_tol']:g} x the summed learning rates = "
        f"{exact['verdicts']['ours']['weight_abs_limit']:.2e} absolute (Adam moves an element "
        "by about the learning rate per step, whatever its gradient).",
        "",
        "| ours | max loss gap (rel) | first step over | max weight abs diff (weight) "
        "| verdict |",
        "|---|---|---|---|---|",
    ]
    lines += [_verdict_row(name, v) for name, v in exact["verdicts"].items()]
    ours = exact["verdicts"]["ours"]["max_loss_rel_gap_by_key"]
    lines += ["", "Largest per-step relative gap of ours by loss: "
              + ", ".join(f"{k} {v:.2e}" for k, v in ours.items()) + ".",
              "Seconds for the part: " + ", ".join(f"{k} {v:.0f}"
                                                   for k, v in exact["seconds"].items()) + ".",
              "", "![per-step loss gaps](exact_losses.png)", ""]
    lines += ["## Learning rate by step (exact part's settings)", "",
              "| step | ours | Model Garden factory | google-research/bert |", "|---|---|---|---|"]
    lines += [f"| {r['step']} | {r['ours']:.3e} | {r['garden']:.3e} | {r['google_bert']:.3e} |"
              for r in results["schedules"]]
    _plot_exact(results, os.path.join(output_dir, "exact_losses.png"))
    if "dropout" in results:
        d = results["dropout"]
        v = d["verdict"]
        lines += [
            "", f"## Dropout {settings['dropout']}, {d['steps_done']} of "
            f"{settings['dropout_steps']} steps", "",
            f"Largest gap between the {settings['smoothing']}-step trailing means of the MLM "
            f"loss: {100 * v['max_rel_gap']:.2f} % at step {v['step_of_max']} (tolerance "
            f"{100 * settings['curve_rtol']:g} %); final smoothed MLM loss ours "
            f"{v['final_smoothed']['ours']:.4f}, Garden {v['final_smoothed']['garden']:.4f}; "
            f"{d['seconds']:.0f} s.", "", "![MLM curves](dropout_mlm.png)",
        ]
        _plot_dropout(results, os.path.join(output_dir, "dropout_mlm.png"))
    ok = results["passed"]
    if not results["complete"]:
        lines += ["", "**Unfinished: the dropout part is still running (or was stopped); "
                  "rerun the same command to resume it.**"]
    verdict = "holds" if ok["parity"] else ("so far holds" if not results["complete"]
                                             and _so_far(results) else "FAILS")
    lines += ["", f"**Parity: {verdict}; negative controls: "
              f"{'all diverge' if ok['controls_diverge'] else 'NOT ALL DIVERGE'}.**", ""]
    with open(os.path.join(output_dir, "report.md"), "w") as f:
        f.write("\n".join(lines))
