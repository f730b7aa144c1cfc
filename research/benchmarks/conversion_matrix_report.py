"""`report.md` and `matrix.png` of the conversion matrix
(`research.benchmarks.conversion_matrix`)."""

import os

FORMAT_NAMES = {"bert_tf": "bert_tf", "hf": "Hugging Face", "google": "Google TF1",
                "garden": "Model Garden", "kerashub": "KerasHub"}
VARIANT_TITLES = {
    "exact": "the checkpoint as it is (exact GELU)",
    "tanh": "the same weights with the tanh GELU (`--hidden_act gelu_tanh`)",
}
# The one refusal the matrix expects: KerasHub and the exact GELU.
EXPECTED_REFUSAL = "KerasHub's BertBackbone uses the tanh GELU"
PLOT_FILE = "matrix.png"
# Where a difference of exactly 0 sits on the plot's log scale.
PLOT_FLOOR = 1e-9


def _number(value):
    return "0" if value == 0 else f"{value:.1e}"


def cell(record):
    """A pair's table cell: "sequence / pooled" max abs difference, or what stopped it."""
    if record["status"] == "converted":
        return (f"{_number(record['sequence_max_abs_diff'])} / "
                f"{_number(record['pooled_max_abs_diff'])}")
    return record["status"]


def pair_as_expected(record, bound):
    """Converted within `bound`, or refused / absent for the reason the format gives."""
    if record["status"] == "converted":
        return max(record["sequence_max_abs_diff"], record["pooled_max_abs_diff"]) <= bound
    kerashub_and_exact = record["variant"] == "exact" and "kerashub" in (
        record["source"], record["target"])
    if record["status"] == "refused":
        return kerashub_and_exact and record["error"].startswith(EXPECTED_REFUSAL)
    return kerashub_and_exact and record["source"] == "kerashub"


def all_as_expected(results):
    """Whether every recorded pair is as `pair_as_expected` says."""
    return all(pair_as_expected(r, results["parity_bound"]) for r in results["pairs"].values())


def _variants(results):
    seen = []
    for record in results["pairs"].values():
        if record["variant"] not in seen:
            seen.append(record["variant"])
    return seen


def _grid_lines(results, variant, value):
    formats = results["formats"]
    lines = ["| from \\ to | " + " | ".join(FORMAT_NAMES[f] for f in formats) + " |",
             "|---|" + "---|" * len(formats)]
    for source in formats:
        cells = []
        for target in formats:
            record = results["pairs"].get(f"{variant}/{source}->{target}")
            cells.append("" if record is None else value(record))
        lines.append(f"| {FORMAT_NAMES[source]} | " + " | ".join(cells) + " |")
    return lines


def _pytorch_cell(record):
    if record["status"] != "converted":
        return record["status"]
    theirs = record["vs_pytorch"]
    return (f"{_number(theirs['sequence_max_abs_diff'])} / "
            f"{_number(theirs['pooled_max_abs_diff'])}")


def report_lines(results):
    """The lines of `report.md`."""
    machine = next(iter(results["pairs"].values()))["machine"]
    lines = ["# Conversion matrix", "",
             "Written by `python -m research.bench conversion_matrix "
             f"--profile {results['settings']['profile']}`. Model: {results['model']}. "
             f"{results['settings']['sentences']} real sentence pairs (64 tokens). "
             f"{machine['cpus']} x {machine['cpu']} (family {machine['cpu_family']} model "
             f"{machine['cpu_model']}), {results['date']}, {results['wall_seconds']:.0f} s.",
             "",
             "Each cell: the largest absolute difference from the original's outputs "
             "(bert_tf's float32 encoder of the original checkpoint), sequence output on "
             "unpadded positions / pooled output, of the source converted to the target by "
             "`python -m bert_tf.convert` and read by the target's reference:", ""]
    references = {r["target"]: r["reference"] for r in results["pairs"].values()
                  if r["status"] == "converted"}
    lines += [f"- {FORMAT_NAMES[f]}: {references[f]}" for f in results["formats"]
              if f in references]
    for variant in _variants(results):
        lines += ["", f"## {variant}: {VARIANT_TITLES[variant]}", ""]
        lines += _grid_lines(results, variant, cell)
        records = [r for r in results["pairs"].values() if r["variant"] == variant]
        errors = sorted({f"{r['status']}: {r['error']}" if r["status"] == "refused"
                         else r["error"] for r in records if r["status"] != "converted"})
        if errors:
            lines += ["", "Not converted:", ""] + [f"- {error}" for error in errors]
        worst = [max(r["sequence_max_abs_diff"], r["pooled_max_abs_diff"])
                 for r in records if r["status"] == "converted"]
        if worst:
            verdict = all(pair_as_expected(r, results["parity_bound"]) for r in records)
            lines += ["", f"{len(worst)} pairs converted; the largest difference "
                      f"{_number(max(worst))} (bound {results['parity_bound']:g}: "
                      f"{'every pair within it' if verdict else 'NOT MET'})."]
        if variant == "exact" and any(r.get("vs_pytorch") for r in records):
            lines += ["", "The same outputs against Hugging Face's PyTorch outputs stored with "
                      "the sentences (sequence on unpadded positions / pooled):", ""]
            lines += _grid_lines(results, variant, _pytorch_cell)
    lines += ["", f"![the largest difference per pair]({PLOT_FILE})", ""]
    return lines


def plot(results, path):
    """A heat map per variant of the larger of the two differences, log scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.colors as colors
    import matplotlib.pyplot as plt
    import numpy as np

    formats = results["formats"]
    variants = _variants(results)
    figure, axes = plt.subplots(1, len(variants), figsize=(5.4 * len(variants), 4.8),
                                squeeze=False, sharey=True)
    norm = colors.LogNorm(vmin=PLOT_FLOOR, vmax=max(results["parity_bound"] * 10, 1e-4))
    image = None
    for ax, variant in zip(axes[0], variants, strict=True):
        grid = np.full((len(formats), len(formats)), np.nan)
        for i, source in enumerate(formats):
            for j, target in enumerate(formats):
                record = results["pairs"].get(f"{variant}/{source}->{target}")
                if record and record["status"] == "converted":
                    worst = max(record["sequence_max_abs_diff"], record["pooled_max_abs_diff"])
                    grid[i, j] = max(worst, PLOT_FLOOR)
                    ax.text(j, i, _number(worst), ha="center", va="center", fontsize=7)
                elif record:
                    ax.text(j, i, record["status"].replace(" ", "\n"), ha="center",
                            va="center", fontsize=7, color="dimgray")
        image = ax.imshow(grid, norm=norm, cmap="viridis_r")
        labels = [FORMAT_NAMES[f] for f in formats]
        ax.set_xticks(range(len(formats)), labels, rotation=30, ha="right", fontsize=8)
        ax.set_yticks(range(len(formats)), labels, fontsize=8)
        ax.set_xlabel("to")
        ax.set_title(f"{variant} GELU", fontsize=10)
    axes[0][0].set_ylabel("from")
    bar = figure.colorbar(image, ax=axes[0].tolist(),
                          label="max abs difference (sequence on real tokens, pooled);\n"
                                f"red: the bound, {results['parity_bound']:g}")
    bar.ax.axhline(results["parity_bound"], color="red")
    figure.suptitle(f"Conversion matrix: {results['model']}", fontsize=10)
    figure.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(figure)


def write_report(results, output_dir):
    """Writes `report.md` and `matrix.png` from `results` into `output_dir`."""
    from research import portable_paths

    text = portable_paths.portable("\n".join(report_lines(results)), output_dir)
    with open(os.path.join(output_dir, "report.md"), "w") as f:
        f.write(text)
    plot(results, os.path.join(output_dir, PLOT_FILE))
