"""A study's outputs: `results.json`, `report.md` and PNG plots, from the finished units.

Everything here is read back from the run directories (eval_results.json,
the curves of TensorBoard event files or of a record's scalars.json,
params.yaml, unit_times.jsonl), so the report can be rewritten at any time,
from a partly finished study too, and from records alone.

Statistics per (arm, task): the main dev metric of every seed at the chosen
learning rate, their mean, sample standard deviation and range. An arm is
better (or worse) than another on a task when its mean is above (or below)
the other's by more than the spread of both arms (the larger of their two
ranges, max - min over seeds); within the spread neither is.
"""

import json
import math
import os
import statistics

import yaml

from bert_tf.training.run_directory import EVAL_RESULTS_FILE, PARAMS_FILE, finished_results
from research.studies import scalars, units

RESULTS_FILE = "results.json"
REPORT_FILE = "report.md"
PLOTS_DIR = "plots"
CURVE_TAGS = ("mlm_accuracy", "nsp_accuracy", "mlm_loss", "nsp_loss")


def _read_json(path):
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def training_loop_seconds(train_curves, batch_size):
    """Seconds spent in training loops, from each loop's logged rate.

    Unlike the invocations' wall times this survives a killed process (whose
    time is never recorded) and leaves out start-up and evaluation.

    Args:
      train_curves: the run's training scalars (`scalars.read(run)["train"]`).
      batch_size: rows per step; used only for runs that logged no
        `steps_per_second` (before it existed), whose `examples_per_second`
        then counts one example per row (they did not pack).
    """
    rates = train_curves.get("steps_per_second")
    if rates is None:
        rates = [(step, rate / batch_size)
                 for step, rate in train_curves.get("examples_per_second", [])]
    seconds, previous = 0.0, 0
    for step, steps_per_second in rates:
        if steps_per_second > 0:
            seconds += (step - previous) / steps_per_second
        previous = step
    return seconds


def pretraining_summary(name, model_dir):
    """Held-out metrics, curves and wall time of one pretraining run."""
    params_path = os.path.join(model_dir, PARAMS_FILE)
    params = None
    if os.path.isfile(params_path):
        with open(params_path, encoding="utf-8") as f:
            params = yaml.safe_load(f)
    # Only a run that reached its last step has a final evaluation: a running one
    # rewrites eval_results.json at every evaluation, which tables must not read as final.
    final = finished_results(model_dir)
    latest = _read_json(os.path.join(model_dir, EVAL_RESULTS_FILE))
    curves = scalars.read(model_dir)
    summary = {"name": name, "model_dir": model_dir,
               "wall_seconds": units.wall_seconds(model_dir),
               "curves": {split: {tag: points for tag, points in tags.items() if tag in CURVE_TAGS}
                          for split, tags in curves.items()}}
    if params is not None:
        encoder = params["model"]["encoder"]
        summary["config"] = {
            "encoder": encoder, "use_nsp": params["model"]["use_nsp"],
            "train_steps": params["trainer"]["train_steps"],
            "global_batch_size": params["trainer"]["global_batch_size"],
            "max_seq_length": params["data"]["max_seq_length"],
            "learning_rate": params["optimizer"]["learning_rate"],
            "warmup_steps": params["optimizer"]["warmup_steps"],
            "mixed_precision": params["runtime"]["mixed_precision"],
            "vocab_file": params["data"]["vocab_file"]}
        summary["train_loop_seconds"] = training_loop_seconds(
            curves["train"], params["trainer"]["global_batch_size"])
    if final is not None:
        metrics = dict(final["metrics"])
        metrics["mlm_perplexity"] = math.exp(metrics["mlm_loss"])
        summary["final_eval"] = {"step": final["step"], "metrics": metrics}
    elif latest is not None:
        summary["latest_eval_step"] = latest["step"]
    first_eval = {tag: points[0] for tag, points in curves["eval"].items() if points}
    if first_eval:
        summary["first_eval"] = first_eval
    return summary


def cell_statistics(cell):
    """Adds mean / std / range of the main metric over the chosen rate's seeds."""
    metric = cell["main_metric"]
    scores = _chosen_rate_scores(cell, metric)
    stats = dict(cell)
    stats["seed_scores"] = scores
    stats["seeds_done"] = len(scores)
    if scores:
        stats["mean"] = statistics.fmean(scores)
        stats["std"] = statistics.stdev(scores) if len(scores) > 1 else 0.0
        stats["range"] = max(scores) - min(scores)
    stats["learning_rate_scores"] = {
        f"{run['learning_rate']:g}": run["metrics"][metric]
        for run in cell["runs"] if run["seed"] == (cell["runs"][0]["seed"] if cell["runs"] else 0)}
    stats["wall_seconds"] = sum(units.wall_seconds(run["model_dir"]) for run in cell["runs"])
    return stats


def comparisons(spec, cells):
    """Per task: each later compared arm against the first, with the spread rule."""
    if len(spec.arms) < 2:
        return []
    by_key = {(c["arm"], c["task"]): c for c in cells}
    base = spec.arms[0].name
    rows = []
    for task in spec.suite.tasks:
        a = by_key.get((base, task.name))
        for arm in spec.arms[1:]:
            b = by_key.get((arm.name, task.name))
            if not (a and b and "mean" in a and "mean" in b):
                continue
            gap = a["mean"] - b["mean"]
            spread = max(a["range"], b["range"])
            # Two-sided: the first arm can be worse beyond the spread, too.
            beyond = abs(gap) > spread
            rows.append({"task": task.name, "metric": a["main_metric"], "arm": base,
                         "versus": arm.name, "gap": gap, "spread": spread,
                         "beyond_spread": beyond,
                         "direction": ("better" if gap > 0 else "worse") if beyond else None,
                         "complete": a["complete"] and b["complete"]})
    return rows


def spread_verdict(row: dict) -> str:
    """A comparison's verdict as the report prints it: "yes, better", "yes, worse" or "no".

    Args:
      row: one of `comparisons`' rows.
    """
    return f"yes, {row['direction']}" if row["beyond_spread"] else "no"


def _pct(value):
    return f"{100 * value:.2f}"


def _chosen_rate_scores(cell, metric):
    """`metric` of every seed run at the cell's chosen learning rate."""
    chosen = cell["chosen_learning_rate"]
    # A metric a run does not report (a typo in a table) is left out, rather than
    # crashing the report hours into the study.
    return [run["metrics"][metric] for run in cell["runs"]
            if chosen is not None and run["learning_rate"] == chosen
            and metric in run["metrics"]]


def _seed_summary(cell, metric):
    """Mean, std, range and count of `metric` over the seeds at the cell's chosen rate."""
    chosen = cell["chosen_learning_rate"]
    scores = _chosen_rate_scores(cell, metric)
    if not scores:
        return None
    return {"mean": statistics.fmean(scores),
            "std": statistics.stdev(scores) if len(scores) > 1 else 0.0,
            "min": min(scores), "max": max(scores), "seeds": len(scores),
            "complete": cell["complete"], "learning_rate": chosen}


def table_results(table, spec, pretraining, cells):
    """One paper-style table: per row, our value of every column and the paper's row.

    Pretraining columns hold the arm's held-out value at the last step; task and
    metric columns the mean, sample std, range and count over the chosen rate's
    seeds. A value is None until its run is finished.
    """
    arms = {arm.name: arm for arm in spec.all_arms()}
    by_name = {entry["name"]: entry for entry in pretraining}
    by_key = {(c["arm"], c["task"]): c for c in cells}
    columns = [{"key": metric, "kind": "pretraining", "label": metric}
               for metric in table.pretraining_metrics]
    for task in table.tasks:
        metric = next((c["main_metric"] for c in cells if c["task"] == task), "")
        columns.append({"key": task, "kind": "task", "label": f"{task} {metric}".strip()})
    columns += [{"key": metric, "kind": "metric", "label": metric} for metric in table.metrics]
    rows = []
    for row in table.rows:
        values = {}
        final = by_name.get(arms[row.arm].pretraining, {}).get("final_eval")
        for metric in table.pretraining_metrics:
            values[metric] = final["metrics"].get(metric) if final else None
        for task in table.tasks:
            cell = by_key.get((row.arm, task))
            values[task] = _seed_summary(cell, cell["main_metric"]) if cell else None
        cell = by_key.get((row.arm, row.task)) if row.task else None
        for metric in table.metrics:
            values[metric] = _seed_summary(cell, metric) if cell else None
        rows.append({"arm": row.arm, "task": row.task, "label": row.label or row.task or row.arm,
                     "values": values, "paper_label": row.paper_label, "paper": list(row.paper)})
    return {"name": table.name, "title": table.title, "columns": columns, "rows": rows,
            "paper_columns": list(table.paper_columns), "paper_source": table.paper_source}


def _table_value(column, value):
    if value is None:
        return "pending"
    if column["kind"] == "pretraining":
        return f"{value:.1f}" if column["key"] == "mlm_perplexity" else _pct(value)
    text = f"{_pct(value['mean'])} ± {_pct(value['std'])} (n={value['seeds']})"
    return text if value["complete"] else text + ", incomplete"


def _tables_markdown(tables):
    """Each table: our columns, then the paper's, one row per arm."""
    lines = []
    for table in tables:
        columns = table["columns"]
        paper_labels = any(row["paper_label"] for row in table["rows"])
        header = ([c["label"] for c in columns] + (["paper: row"] if paper_labels else [])
                  + [f"paper: {name}" for name in table["paper_columns"]])
        held_out = ("held-out pretraining metrics at the last step (accuracy x 100); "
                    if any(c["kind"] == "pretraining" for c in columns) else "")
        lines += [f"## {table['title'] or table['name']}", "",
                  f"Ours: {held_out}scores x 100 as the mean ± sample std over seeds at "
                  "the chosen learning rate. "
                  f"Paper: {table['paper_source'] or 'as published'}.", "",
                  "| row | " + " | ".join(header) + " |", "|---|" + "---|" * len(header)]
        for row in table["rows"]:
            ours = [_table_value(c, row["values"][c["key"]]) for c in columns]
            paper = ["" if v is None else str(v) for v in row["paper"]]
            paper += [""] * (len(table["paper_columns"]) - len(paper))
            if paper_labels:
                paper.insert(0, row["paper_label"])
            lines.append(f"| {row['label']} | " + " | ".join(ours + paper) + " |")
        lines += ["", f"![{table['name']}](plots/{table['name']}.png)", ""]
    return lines


def _temporary_path(path):
    # Per process: two processes of one study may write the report at the same time.
    root, extension = os.path.splitext(path)
    return f"{root}.{os.getpid()}.tmp{extension}"


def _save(fig, path):
    """Saves a figure by atomic rename, so a reader never sees half a PNG."""
    temporary = _temporary_path(path)
    fig.savefig(temporary, dpi=90)
    os.replace(temporary, path)


def plot_table(table, path):
    """One panel per column of ours: a bar per row (mean), seed range as whiskers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = table["columns"]
    fig, axes = plt.subplots(1, max(len(columns), 1), squeeze=False,
                             figsize=(max(4, 3.2 * len(columns)), 3.6))
    labels = [row["label"] for row in table["rows"]]
    for ax, column in zip(axes[0], columns):
        for i, row in enumerate(table["rows"]):
            value = row["values"][column["key"]]
            if value is None:
                continue
            if column["kind"] == "pretraining":
                scale = 1 if column["key"] == "mlm_perplexity" else 100
                ax.bar(i, scale * value, 0.7, alpha=0.8)
            else:
                mean = 100 * value["mean"]
                ax.bar(i, mean, 0.7, alpha=0.8,
                       yerr=[[mean - 100 * value["min"]], [100 * value["max"] - mean]], capsize=3)
        ax.set_title(column["label"], fontsize=9)
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=7)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(table["title"] or table["name"], fontsize=10)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def plot_pretraining(pretraining, path):
    """Held-out and training MLM / NSP accuracy against steps, one line per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for entry in pretraining:
        curves = entry["curves"]
        for ax, tag in zip(axes[:2], ("mlm_accuracy", "nsp_accuracy")):
            for split, style in (("train", "-"), ("eval", "o-")):
                points = curves[split].get(tag, [])
                if points:
                    steps, values = zip(*points)
                    ax.plot(steps, [100 * v for v in values], style, markersize=3,
                            label=f"{entry['name']} {'held-out' if split == 'eval' else 'train'}")
        points = curves["eval"].get("mlm_loss", [])
        if points:
            steps, values = zip(*points)
            axes[2].plot(steps, [math.exp(v) for v in values], "o-", markersize=3,
                         label=f"{entry['name']} held-out")
    axes[0].set_title("MLM accuracy (%)")
    axes[1].set_title("NSP accuracy (%)")
    axes[1].axhline(50, color="grey", linewidth=0.8, linestyle=":")
    axes[2].set_title("MLM perplexity (held-out)")
    axes[2].set_yscale("log")
    for ax in axes:
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def plot_scores(spec, cells, path):
    """Mean dev score per task and arm, with each seed's score and the range."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = [arm.name for arm in spec.all_arms()]
    tasks = [task.name for task in spec.suite.tasks]
    by_key = {(c["arm"], c["task"]): c for c in cells}
    width = 0.8 / max(len(arms), 1)
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(tasks)), 3.8))
    for i, arm in enumerate(arms):
        xs, means, low, high = [], [], [], []
        for j, task in enumerate(tasks):
            cell = by_key.get((arm, task))
            if not cell or "mean" not in cell:
                continue
            x = j + (i - (len(arms) - 1) / 2) * width
            scores = [100 * s for s in cell["seed_scores"]]
            xs.append(x)
            means.append(100 * cell["mean"])
            # Clamped: equal seed scores (a model that always predicts one class) give a
            # mean a rounding error outside their range, and matplotlib rejects it.
            low.append(max(0.0, 100 * cell["mean"] - min(scores)))
            high.append(max(0.0, max(scores) - 100 * cell["mean"]))
            ax.plot([x] * len(scores), scores, "k.", markersize=3)
        if xs:
            ax.bar(xs, means, width, yerr=[low, high], capsize=3, label=arm, alpha=0.8)
    ax.set_xticks(range(len(tasks)))
    ax.set_xticklabels([f"{t}\n{by_key.get((arms[0], t), {}).get('main_metric', '')}"
                        for t in tasks], fontsize=8)
    ax.set_ylabel("dev score x 100")
    ax.grid(axis="y", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.set_title("bars: mean over seeds; whiskers: their range; dots: single seeds",
                     fontsize=9)
        # Below the axes: inside, it would cover the bars of the first task.
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2),
                  ncol=len(arms), frameon=False)
    else:
        ax.set_title("no finished (arm, task) yet")
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def _pretraining_markdown(study, manifest, pretraining):
    """The Corpus and Pretraining sections (studies with pretraining entries)."""
    lines = ["## Corpus", "",
             f"Every {manifest['holdout_every']}th document of each source is held out. "
             f"Vocabulary: `{study.vocab_file}`.", "",
             "| source | train documents | train words | held-out documents | held-out words |",
             "|---|---|---|---|---|"]
    for name, counts in manifest["sources"].items():
        lines.append(f"| {name} | {counts['train']['documents']:,} | {counts['train']['words']:,} "
                     f"| {counts['heldout']['documents']:,} | {counts['heldout']['words']:,} |")
    lines += ["", "## Pretraining", ""]
    for entry in pretraining:
        config = entry.get("config")
        final = entry.get("final_eval")
        if config and final:
            e = config["encoder"]
            lines.append(f"`{entry['name']}`: L{e['num_layers']}/H{e['hidden_size']}/"
                         f"A{e['num_heads']}, vocab {e['vocab_size']:,}, "
                         f"{'MLM + NSP' if config['use_nsp'] else 'MLM only'}, "
                         f"{config['train_steps']:,} steps of batch {config['global_batch_size']} "
                         f"at length {config['max_seq_length']}, lr {config['learning_rate']:g} "
                         f"({config['warmup_steps']} warmup steps, linear decay), "
                         f"{config['mixed_precision']}; training loops "
                         f"{entry['train_loop_seconds'] / 60:.1f} min (from the logged "
                         f"rates), recorded wall time {entry['wall_seconds'] / 60:.1f} min "
                         "(invocations that were killed record none).")
        if final:
            m = final["metrics"]
            first = entry.get("first_eval", {})
            start = ""
            if "mlm_accuracy" in first:
                start = (f" (first evaluation, step {first['mlm_accuracy'][0]}: MLM "
                         f"{_pct(first['mlm_accuracy'][1])} %"
                         + (f", NSP {_pct(first['nsp_accuracy'][1])} %"
                            if "nsp_accuracy" in first else "") + ")")
            nsp = (f", NSP accuracy **{_pct(m['nsp_accuracy'])} %**"
                   if "nsp_accuracy" in m else "")
            lines.append(f"Held-out at step {final['step']:,}: MLM accuracy "
                         f"**{_pct(m['mlm_accuracy'])} %**, MLM perplexity "
                         f"{m['mlm_perplexity']:.1f}{nsp}{start}.")
        elif "latest_eval_step" in entry:
            lines.append(f"`{entry['name']}`: not finished yet (evaluated at step "
                         f"{entry['latest_eval_step']:,} so far).")
        else:
            lines.append(f"`{entry['name']}`: not finished yet.")
        lines.append("")
    lines += ["![pretraining curves](plots/pretraining.png)", ""]
    return lines


def _markdown(study, manifest, pretraining, cells, rows, tables):
    spec = study.spec
    lines = [f"# Study `{spec.name}` (profile `{study.profile}`)", "", spec.description.strip(), ""]
    lines += _tables_markdown(tables)
    if manifest is not None:  # a fine-tuning-only study has no corpus or pretraining
        lines += _pretraining_markdown(study, manifest, pretraining)
    lines += ["## Fine-tuning", "",
              f"Learning rates {', '.join(f'{lr:g}' for lr in spec.suite.learning_rates)} "
              f"(unless a task lists its own) with "
              f"seed {spec.suite.seeds[0]}; the best by the task's main dev metric is kept "
              f"(the same rule for every arm) and run with seeds "
              f"{', '.join(str(s) for s in spec.suite.seeds[1:]) or '(none)'}. Common "
              f"overrides: `{' '.join(spec.suite.overrides) or 'none'}`.", ""]
    for task in spec.suite.tasks:
        line = f"- {task.name}: `{task.config}`"
        if task.overrides:
            line += f" with `{' '.join(task.overrides)}`"
        if task.learning_rates:
            line += f"; its own learning rates {', '.join(f'{lr:g}' for lr in task.learning_rates)}"
        lines.append(line)
    arms = [arm.name for arm in spec.all_arms()]
    lines += ["", "Mean main dev metric x 100 over seeds, +- sample std (range), chosen lr:", "",
              "| task | metric | " + " | ".join(arms) + " |",
              "|---|---|" + "---|" * len(arms)]
    by_key = {(c["arm"], c["task"]): c for c in cells}
    for task in spec.suite.tasks:
        row = [task.name, by_key.get((arms[0], task.name), {}).get("main_metric", "")]
        for arm in arms:
            cell = by_key.get((arm, task.name))
            if not cell:
                row.append("-")  # the arm does not fine-tune on this task
                continue
            if "mean" not in cell:
                row.append("pending")
                continue
            text = (f"{_pct(cell['mean'])} +- {_pct(cell['std'])} "
                    f"({_pct(min(cell['seed_scores']))}-{_pct(max(cell['seed_scores']))}), "
                    f"lr {cell['chosen_learning_rate']:g}, {cell['seeds_done']} seed(s)")
            if not cell["complete"]:
                text += ", incomplete"
            row.append(text)
        lines.append("| " + " | ".join(row) + " |")
    if rows:
        base = spec.arms[0].name
        lines += ["", f"Gap `{base}` minus the other arm, against the spread "
                  "(the larger range over seeds of the two arms); beyond the spread, "
                  f"`{base}` is better (gap above it) or worse (gap below minus it):", "",
                  "| task | versus | gap | spread | gap beyond spread |",
                  "|---|---|---|---|---|"]
        for r in rows:
            lines.append(f"| {r['task']} | {r['versus']} | {_pct(r['gap'])} | "
                         f"{_pct(r['spread'])} | {spread_verdict(r)}"
                         f"{'' if r['complete'] else ' (incomplete)'} |")
    grids = [spec.suite.learning_rates_of(task) for task in spec.suite.tasks]
    rates = list(dict.fromkeys(f"{lr:g}" for grid in grids for lr in grid))
    lines += ["", f"Selection: main dev metric x 100 of every learning rate with seed "
              f"{spec.suite.seeds[0]}:", "",
              "| task | arm | " + " | ".join(f"lr {r}" for r in rates) + " |",
              "|---|---|" + "---|" * len(rates)]
    for task, grid in zip(spec.suite.tasks, grids):
        grid = {f"{lr:g}" for lr in grid}
        for arm in arms:
            cell = by_key.get((arm, task.name))
            scores = cell.get("learning_rate_scores", {}) if cell else {}
            if scores:
                # A rate outside the task's own grid is never run: "-", not "pending".
                lines.append(f"| {task.name} | {arm} | " + " | ".join(
                    _pct(scores[r]) if r in scores else "pending" if r in grid else "-"
                    for r in rates) + " |")
    lines += ["", "![dev scores](plots/dev_scores.png)", "",
              "Every run's metrics, learning rate, seed and directory are in `results.json`.", ""]
    return "\n".join(lines)


def write(study, manifest, cells):
    """Writes results.json, report.md and plots/*.png into the study's directory."""
    out = study.out_dir
    pretraining = [pretraining_summary(p.name, study.pretraining_dir(p.name))
                   for p in study.spec.pretraining]
    cells = [cell_statistics(cell) for cell in cells]
    rows = comparisons(study.spec, cells)
    tables = [table_results(table, study.spec, pretraining, cells) for table in study.spec.tables]
    results = {"study": study.spec.name, "profile": study.profile, "corpus": manifest,
               "pretraining": pretraining, "finetuning": cells, "comparisons": rows,
               "tables": tables}
    os.makedirs(os.path.join(out, PLOTS_DIR), exist_ok=True)
    if pretraining:
        plot_pretraining(pretraining, os.path.join(out, PLOTS_DIR, "pretraining.png"))
    plot_scores(study.spec, cells, os.path.join(out, PLOTS_DIR, "dev_scores.png"))
    for table in tables:
        plot_table(table, os.path.join(out, PLOTS_DIR, f"{table['name']}.png"))
    markdown = _markdown(study, manifest, pretraining, cells, rows, tables)
    for name, text in ((RESULTS_FILE, json.dumps(results, indent=2)),
                       (REPORT_FILE, markdown)):
        path = os.path.join(out, name)
        temporary = _temporary_path(path)
        with open(temporary, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(temporary, path)
    return results
