"""`report.md` and `ratios.png` of the packing benchmark (`research.benchmarks.packing`)."""

import os

RUNNER_NAMES = {
    "ours_packed": "bert_tf, packed rows",
    "ours_padded": "bert_tf, padded rows",
    "ours_dynamic": "bert_tf, dynamic padding",
    "garden_padded": "Model Garden, padded rows",
}
PADDING_NAMES = {
    "padded": "padded to max_seq_length", "dynamic": "dynamic padding (batch of 32)",
    "packed": "packed rows",
}


def headline_ratio(name, part):
    """Ours packed / Model Garden for a part (serve: texts/s at batch 32)."""
    if name == "serve":
        models = part["batches"].get("32")
        if not models or "garden" not in models:
            return None
        return models["bert_tf"]["texts_per_s"] / models["garden"]["texts_per_s"]
    return part["summary"]["ours_packed"]["ratio_to_garden_padded"]


def _verdict(name, ratio):
    from research.benchmarks.packing import TARGETS

    target = TARGETS[name]
    return f"{ratio:.2f}x (target {target}x: {'met' if ratio >= target else 'not met'})"


def _pretrain_lines(name, part):
    lines = [f"### {name}: sequence length {part['seq_length']}, {part['rows']} rows per batch",
             "", "| setup | real tokens/s | s/step | ratio to Model Garden | % of fp32 matmul "
             "peak |", "|---|---|---|---|---|"]
    peak = part["fp32_matmul_peak_gflops"]
    for runner, summary in part["summary"].items():
        flops = part["step_matmul_flops"]["packed" if runner == "ours_packed" else "padded"]
        fraction = flops / summary["seconds_per_step"] / 1e9 / peak
        lines.append(f"| {RUNNER_NAMES[runner]} | {summary['rate']:.0f} | "
                     f"{summary['seconds_per_step']:.3f} | "
                     f"{summary['ratio_to_garden_padded']:.2f}x | {100 * fraction:.0f} % |")
    lines += ["", f"Ours packed / Model Garden: {_verdict(name, headline_ratio(name, part))}; "
              f"packed / our padded rows: {packed_to_unpacked(part, 'ours_padded'):.2f}x. "
              f"fp32 matmul peak {peak:.0f} GFLOP/s.", ""]
    return lines


def _finetune_lines(name, part):
    lines = [f"### {name}: batches of {part['examples_per_batch']} examples "
             f"(packed: {part['packed_rows_per_batch']} rows)", "",
             "| setup | examples/s | s/step | ratio to Model Garden |", "|---|---|---|---|"]
    for runner, summary in part["summary"].items():
        lines.append(f"| {RUNNER_NAMES[runner]} | {summary['rate']:.1f} | "
                     f"{summary['seconds_per_step']:.3f} | "
                     f"{summary['ratio_to_garden_padded']:.2f}x |")
    lines += ["", f"Ours packed / Model Garden: {_verdict(name, headline_ratio(name, part))}; "
              f"packed / our dynamic padding: {packed_to_unpacked(part, 'ours_dynamic'):.2f}x.",
              ""]
    return lines


def packed_to_unpacked(part, unpacked):
    """Ours packed / ours unpacked (`unpacked`: the runner) in a pretraining or fine-tuning
    part: the median per-round ratio of their rates, as every ratio of the report."""
    from research.benchmarks.packing import median_ratio

    rate_key = "tokens" if "seq_length" in part else "examples"  # pretraining: real tokens
    return median_ratio(part["rounds"], rate_key, "ours_packed", unpacked)


def _serve_lines(part):
    lines = [f"### serve: {part['preset']}, max_seq_length {part['max_seq_length']}", "",
             "| batch | model | texts/s | p50 ms | p95 ms |", "|---|---|---|---|---|"]
    for batch, models in part["batches"].items():
        for model, summary in models.items():
            lines.append(f"| {batch} | {model} | {summary['texts_per_s']:.1f} | "
                         f"{summary['p50_ms']:.1f} | {summary['p95_ms']:.1f} |")
    ratio = headline_ratio("serve", part)
    if ratio is not None:
        lines += ["", f"bert_tf / Model Garden at batch 32: {_verdict('serve', ratio)}."]
    return lines + [""]


def _padding_lines(part):
    lines = ["### padding", "", "| data set | batching | padding | examples per row |",
             "|---|---|---|---|"]
    for key, value in part.items():
        if not isinstance(value, dict) or "padding" not in value:
            continue
        data_set, setup = key.rsplit("_", 1)
        lines.append(f"| {data_set} | {PADDING_NAMES[setup]} | {100 * value['padding']:.1f} % "
                     f"| {value['examples_per_row']:.2f} |")
    return lines + [""]


def write_report(results, output_dir):
    """Writes `report.md` (every finished part) and `ratios.png` (ratios against targets)."""
    lines = ["# Packing benchmark", "",
             "Written by `python -m research.bench packing`; ratios are medians of per-round "
             "ratios within one run (serve: texts/s over all of its alternating timed calls).",
             ""]
    ratios = {}
    for name, part in results["parts"].items():
        machine = part.get("machine", {})
        if name == "padding":
            lines += _padding_lines(part)
        elif name == "serve":
            lines += _serve_lines(part)
        elif name.startswith("pretrain_"):
            lines += _pretrain_lines(name, part)
        else:
            lines += _finetune_lines(name, part)
        if machine:
            lines += [f"({machine['cpus']} x {machine['cpu']}, load {machine['load_average']:.2f}"
                      f" at the end, {part['wall_seconds']:.0f} s)", ""]
        if name != "padding":
            ratio = headline_ratio(name, part)
            if ratio is not None:
                ratios[name] = ratio
    with open(os.path.join(output_dir, "report.md"), "w") as f:
        f.write("\n".join(lines))
    if ratios:
        _plot(ratios, os.path.join(output_dir, "ratios.png"))


def _plot(ratios, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from research.benchmarks.packing import TARGETS

    names = list(ratios)
    fig, ax = plt.subplots(figsize=(1.6 * len(names) + 2, 3.5))
    ax.bar(names, [ratios[n] for n in names], color="tab:blue", label="bert_tf packed")
    ax.scatter(names, [TARGETS[n] for n in names], marker="_", s=600, color="tab:red",
               label="target", zorder=3)
    ax.axhline(1.0, color="gray", linewidth=0.8)
    ax.set_ylabel("speed / Model Garden")
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
