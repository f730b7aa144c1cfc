"""`report.md` and `speed.png` of the serving-runtimes benchmark
(`research.benchmarks.serving_runtimes`)."""

import os

NAMES = {
    "export_text": "bert_tf export, `serving_default` (raw text, tokenizer inside)",
    "export_ids": "bert_tf export, `serve_token_ids`",
    "export_int8": "bert_tf int8 export (`--quantize int8`), `serve_token_ids`",
    "ort_fp32": "ONNX Runtime fp32 (graph-optimised)",
    "ort_int8": "ONNX Runtime int8 (dynamic quantization)",
    "export_ids_frozen": "experiment: `serve_token_ids`, variables frozen to constants",
    "model_xla": "experiment: the encoder XLA-compiled (`jit_compile=True`), no input checks",
    "bert_tf": "bert_tf in-graph tokenizer + packer",
    "hf_tokenizers": "Hugging Face `tokenizers`",
}
# Load average (1 min) per core above which the timings are flagged as unreliable.
BUSY_LOAD = 1.5
SHORT = {"export_text": "export text", "export_ids": "export ids", "export_int8": "export int8",
         "ort_fp32": "ORT fp32",
         "ort_int8": "ORT int8", "export_ids_frozen": "ids, frozen", "model_xla": "XLA"}


def speed_parts(results):
    """{batch size: part} of the finished speed parts, in batch order."""
    parts = {int(name.split("_", 1)[1]): part for name, part in results["parts"].items()
             if name.startswith("batch_") and name.split("_", 1)[1].isdigit()}
    return dict(sorted(parts.items()))


def _ort_ratios(summary, name):
    """"a / b" of `name`'s rate to ONNX Runtime fp32 and int8 (each a median of per-round
    ratios, through `serve_token_ids`), or "-" without them."""
    cells = []
    for peer in ("ort_fp32", "ort_int8"):
        if peer not in summary:
            cells.append("-")
            continue
        ratio = summary[name]["ratio_to_export_ids"] / summary[peer]["ratio_to_export_ids"]
        cells.append(f"{ratio:.2f}x")
    return " / ".join(cells)


def _speed_lines(parts, busy, flipped=None):
    sizes = list(parts)
    header = "| contender | " + " | ".join(
        f"batch {b}: sentences/s | ratio | to ORT fp32 / int8 | p50 ms" for b in sizes
    ) + " | pooled max abs diff |"
    lines = ["## Speed", "", header, "|---|" + "---|---|---|---|" * len(sizes) + "---|"]
    names = list(next(iter(parts.values()))["summary"])
    rewrite = next(iter(parts.values()))["machine"].get("onednn_rewrite")
    for name in names:
        cells = []
        for size in sizes:
            summary = parts[size]["summary"]
            s = summary[name]
            cells.append(f"{s['sentences_per_s']:,.0f} | {s['ratio_to_export_ids']:.2f}x | "
                         f"{_ort_ratios(summary, name)} | {s['p50_ms']:.2f}")
        diff = max(parts[size]["summary"][name]["pooled_max_abs_diff"] for size in sizes)
        label = NAMES[name]
        if rewrite is not None and name.startswith("export"):
            label += f", oneDNN rewrite {'on' if rewrite else 'off'}"
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {diff:.1e} |")
    lines += _flipped_rows(parts, flipped)
    lines += ["", "Ratios: to `serve_token_ids`, medians of per-round ratios; to ONNX Runtime "
              "through them. Pooled max abs diff: against `serve_token_ids` on the same "
              "batches.", ""]
    for size, part in parts.items():
        settings = part["settings"]
        spinning = settings.get("ort_spinning", "on")
        lines.append(f"- batch {size}: {part['batches']} batches per round, "
                     f"{settings['rounds']} rounds, mean padded length "
                     f"{part['mean_padded_length']:.1f}; ONNX Runtime at "
                     f"{settings['ort_threads']} intra-op threads, spinning {spinning}.")
    one = parts.get(1)
    if one and "ort_fp32" in one["summary"]:
        ratio = 1 / one["summary"]["ort_fp32"]["ratio_to_export_ids"]
        verdict = "met" if ratio >= _target() else "not met"
        if "batch_1" in busy:
            verdict = "not judged on a busy machine"
        lines += ["", f"Batch 1, `serve_token_ids` / ONNX Runtime fp32: {ratio:.2f}x "
                  f"(target {_target()}x: {verdict})."]
    return lines + [""]


def _flipped_rows(parts, flipped):
    """Rows of the SavedModels timed in the second process (`onednn_flipped`)."""
    if not flipped:
        return []
    rows = []
    rewrite = "on" if flipped["onednn_rewrite"] else "off"
    sizes = [size for size in parts if f"batch_{size}" in flipped["parts"]]
    if sizes != list(parts):
        return []
    for name in next(iter(flipped["parts"].values()))["summary"]:
        cells = []
        for size in sizes:
            summary = flipped["parts"][f"batch_{size}"]["summary"]
            s = summary[name]
            # Against ONNX Runtime of the first process: same machine, same batches, minutes
            # apart (the rates' ratio, not per-round).
            peers = parts[size]["summary"]
            ort = " / ".join(
                f"{s['sentences_per_s'] / peers[peer]['sentences_per_s']:.2f}x"
                if peer in peers else "-" for peer in ("ort_fp32", "ort_int8"))
            cells.append(f"{s['sentences_per_s']:,.0f} | {s['ratio_to_export_ids']:.2f}x | "
                         f"{ort} | {s['p50_ms']:.2f}")
        rows.append(f"| {NAMES[name]}, oneDNN rewrite {rewrite} (second process) | "
                    + " | ".join(cells) + " | - |")
    return rows


def _batch_mates_lines(part):
    lines = ["## Batch-mates", "",
             f"{part['sentences']} SST-2 dev sentences, each alone (mean padded length "
             f"{part['mean_padded_length_alone']:.1f}) and as the first row of a batch of "
             f"{part['batch_size']} with the longest dev sentences (padded length "
             f"{part['padded_length_batched']}): the largest change of its pooled output, "
             "beside how far the variant is from the float32 export (alone).", "",
             "| variant | alone vs batched | vs float32 export |", "|---|---|---|"]
    for name, values in part["variants"].items():
        lines.append(f"| {NAMES[name]} | {values['alone_vs_batched_max_abs_diff']:.1e} | "
                     f"{values['vs_float_alone_max_abs_diff']:.1e} |")
    return lines + [""]


def _target():
    from research.benchmarks.serving_runtimes import BATCH_1_TARGET

    return BATCH_1_TARGET


def _tokenize_lines(part):
    sizes = list(part["batch_sizes"])
    lines = ["## Tokenization alone (text to padded ids)", "",
             "| tokenizer | " + " | ".join(f"batch {b}: sentences/s | ms per call"
                                          for b in sizes) + " |",
             "|---|" + "---|---|" * len(sizes)]
    names = list(part["batch_sizes"][sizes[0]]["summary"])
    for name in names:
        cells = [f"{part['batch_sizes'][b]['summary'][name]['sentences_per_s']:,.0f} | "
                 f"{part['batch_sizes'][b]['summary'][name]['p50_ms']:.3f}" for b in sizes]
        lines.append(f"| {NAMES[name]} | " + " | ".join(cells) + " |")
    lines.append("")
    if part["hf_installed"]:
        for size in sizes:
            entry = part["batch_sizes"][size]
            lines.append(f"- batch {size}: identical ids in {entry['same_ids_batches']} of "
                         f"{entry['batches']} batches.")
    else:
        lines.append("Hugging Face `tokenizers` is not installed: ours alone.")
    return lines + [""]


def _quality_lines(part):
    lines = ["## Quality", "",
             f"STS-B dev ({part['pairs']:,} pairs): Spearman x100 of the cosine of mean-pooled "
             "sentence embeddings (`sequence_output` over the real tokens).", "",
             "| variant | STS-B Spearman | pooled max abs diff vs export |", "|---|---|---|"]
    for name, values in part["variants"].items():
        lines.append(f"| {NAMES[name]} | {values['stsb_spearman']:.2f} | "
                     f"{values['pooled_max_abs_diff']:.1e} |")
    return lines + [""]


def _finetuned_lines(part):
    from research.benchmarks.serving_quality import VARIANTS

    tasks = part["tasks"]
    lines = ["## Fine-tuned task quality", "",
             "Dev sets, x100: accuracy (SST-2, MRPC), Pearson (STS-B); the same token ids "
             "through every variant.", "",
             "| variant | " + " | ".join(f"{task} {entry['metric']} (n={entry['dev_examples']})"
                                     for task, entry in tasks.items()) + " |",
             "|---|" + "---|" * len(tasks)]
    for variant in VARIANTS:
        cells = []
        for entry in tasks.values():
            values = entry["variants"][variant]
            delta = values["score"] - entry["variants"]["export_ids"]["score"]
            cells.append(f"{values['score']:.2f} ({delta:+.2f})")
        lines.append(f"| {NAMES[variant]} | " + " | ".join(cells) + " |")
    return lines + ["", "In brackets: the difference to the float32 SavedModel.", ""]


def write_report(results, output_dir):
    """Writes `report.md` (every finished part) and `speed.png` (the speed parts)."""
    lines = ["# Serving runtimes", "",
             "Written by `python -m research.bench serving_runtimes`. One process, "
             "contenders alternating by rounds; the same token ids for every contender.", ""]
    parts = results["parts"]
    speed = speed_parts(results)
    busy = busy_parts(parts)
    if busy:
        lines += [f"**Busy machine**: the load average exceeded the {BUSY_LOAD} x cores "
                  f"during {', '.join(busy)}, so its timings are inflated and its ratios "
                  "unreliable (ONNX Runtime's spinning threads suffer most); rerun on an "
                  "otherwise idle machine. Agreement and quality figures are unaffected.", ""]
    if speed:
        lines += _speed_lines(speed, busy, parts.get("onednn_flipped"))
    if "tokenize" in parts:
        lines += _tokenize_lines(parts["tokenize"])
    if "quality" in parts:
        lines += _quality_lines(parts["quality"])
    if "batch_mates" in parts:
        lines += _batch_mates_lines(parts["batch_mates"])
    if "finetuned" in parts:
        lines += _finetuned_lines(parts["finetuned"])
    lines += _machine_lines(parts)
    with open(os.path.join(output_dir, "report.md"), "w") as f:
        f.write("\n".join(lines))
    if speed:
        _plot(speed, parts.get("quality"), os.path.join(output_dir, "speed.png"),
              busy=bool(busy))


def busy_parts(parts):
    """Names of the timed parts during which other processes loaded the machine."""
    busy = []
    for name, part in parts.items():
        machine = part["machine"]
        load = max(machine["load_average_before"], machine["load_average_after"])
        if (name not in ("quality", "finetuned", "batch_mates")
                and load > BUSY_LOAD * machine["cpus"]):
            busy.append(name)
    return busy


def _machine_lines(parts):
    lines = ["## Machine", ""]
    for name, part in parts.items():
        machine = part["machine"]
        rewrite = machine.get("onednn_rewrite")
        setting = "" if rewrite is None else f", oneDNN rewrite {'on' if rewrite else 'off'}"
        lines.append(f"- {name}: {machine['cpus']} x {machine['cpu']}{setting}, load average "
                     f"{machine['load_average_before']:.1f} before, "
                     f"{machine['load_average_after']:.1f} after, {part['wall_seconds']:.0f} s.")
    if parts:
        versions = next(iter(parts.values()))["machine"]["versions"]
        lines += ["", "Versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()) + "."]
    return lines + [""]


def _plot(speed, quality, path, busy):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(next(iter(speed.values()))["summary"])
    labels = []
    for name in names:
        label = SHORT[name]
        if quality and name in quality["variants"]:
            label += f"\nSTS-B {quality['variants'][name]['stsb_spearman']:.2f}"
        labels.append(label)
    width = 0.8 / len(speed)
    fig, ax = plt.subplots(figsize=(1.8 * len(names) + 2, 3.8))
    for i, (size, part) in enumerate(speed.items()):
        values = [part["summary"][n]["ratio_to_export_ids"] for n in names]
        positions = [j + (i - (len(speed) - 1) / 2) * width for j in range(len(names))]
        ax.bar(positions, values, width, label=f"batch {size}")
    ax.set_xticks(range(len(names)), labels)
    ax.axhline(1.0, color="gray", linewidth=0.8)
    ax.set_ylabel("sentences/s / serve_token_ids")
    ax.legend(loc="upper left")
    if busy:
        ax.set_title("busy machine: timings unreliable (see report.md)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
