"""report.md and time_by_op_type.png of the serving profile (`serving_profile`)."""

import os

LABELS = {
    "export_text": "float export, `serving_default` (raw text)",
    "export_ids": "float export, `serve_token_ids`",
    "export_int8_ids": "int8 export, `serve_token_ids`",
}
TOP_TYPES = 12


def _summary_lines(contenders):
    lines = ["| contender | request ms (untraced p50) | request ms (traced p50) | ops per request "
             "| time in ops, ms | runtime outside ops, ms | tokenizer ops | tokenizer ms "
             "(share of request) |",
             "|---|---|---|---|---|---|---|---|"]
    for name, result in contenders.items():
        outside = result["mean_request_ms"] - result["op_ms_per_request"]
        share = result["tokenizer_ms_per_request"] / result["mean_request_ms"]
        lines.append(
            f"| {LABELS.get(name, name)} | {result['untraced_request_ms']:.2f} "
            f"| {result['request_ms']:.2f} | {result['ops_per_request']:.0f} "
            f"| {result['op_ms_per_request']:.2f} | {outside:.2f} "
            f"| {result['tokenizer_ops_per_request']:.0f} "
            f"| {result['tokenizer_ms_per_request']:.2f} ({share:.0%}) |")
    return lines


def _type_lines(name, result):
    total = result["mean_request_ms"]
    lines = [f"### {LABELS.get(name, name)}", "",
             "| op type | executions per request | ms per request | share of request |",
             "|---|---|---|---|"]
    types = list(result["by_type"].items())
    for op_type, figures in types[:TOP_TYPES]:
        lines.append(f"| `{op_type}` | {figures['ops']:.0f} | {figures['ms']:.3f} "
                     f"| {figures['ms'] / total:.1%} |")
    rest = types[TOP_TYPES:]
    if rest:
        ops = sum(figures["ops"] for _, figures in rest)
        ms = sum(figures["ms"] for _, figures in rest)
        lines.append(f"| {len(rest)} other types | {ops:.0f} | {ms:.3f} | {ms / total:.1%} |")
    return lines + [""]


def _machine_lines(contenders):
    lines = []
    for name, result in contenders.items():
        described = result["machine"]
        lines.append(f"- {name}: {described['cpus']} x {described['cpu']} (family "
                     f"{described['cpu_family']} model {described['cpu_model']}), oneDNN "
                     f"rewrite {'on' if described['onednn_rewrite'] else 'off'}, load average "
                     f"{described['load_average_before']} before, "
                     f"{described['load_average']} after, {result['wall_seconds']:.0f} s.")
    return lines


def write_report(results, output_dir):
    """Writes report.md and time_by_op_type.png from `results` (serving_profile.run's)."""
    contenders = results["contenders"]
    if not contenders:
        return
    settings = next(iter(contenders.values()))["settings"]
    lines = ["# Serving profile: one batch-1 request", "",
             "Written by `python -m research.bench serving_profile`. Each contender served "
             f"{settings['requests']} batch-1 requests (GLUE SST-2 dev sentences) under "
             "TensorFlow's profiler (host tracer level 3) after "
             f"{settings['warmup']} untraced ones; model `{settings['model']}`, "
             f"`--max_seq_length {settings['max_seq_length']}`.", "",
             "Time in ops is the ops' self time (nested ops subtracted from the "
             "function-call ops that hold them); the runtime outside ops is the mean "
             "request time minus it: the Python call, argument conversion and the "
             "function runtime's dispatch. Tracing slows each op a little, so traced "
             "requests are longer than untraced ones; the counts and shares are the "
             "profile's point.", "",
             "## Per request", "", *_summary_lines(contenders), "",
             "## Time by op type", "",
             "The kernels TensorFlow ran, after its graph rewrites (`_MklFusedMatMul`: "
             "a matmul fused by oneDNN with its bias; `_FusedMatMul`: the stock fusion).", ""]
    for name, result in contenders.items():
        lines += _type_lines(name, result)
    lines += ["## Machine", "", *_machine_lines(contenders), ""]
    with open(os.path.join(output_dir, "report.md"), "w") as f:
        f.write("\n".join(lines))
    _plot(contenders, os.path.join(output_dir, "time_by_op_type.png"))


def _plot(contenders, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(contenders)
    types = []
    for result in contenders.values():
        for op_type in list(result["by_type"])[:8]:
            if op_type not in types:
                types.append(op_type)
    figure, axis = plt.subplots(figsize=(9, 0.5 + 0.45 * len(names) + 2))
    labelled = set()
    for row, name in enumerate(names):
        result, left = contenders[name], 0.0
        for index, op_type in enumerate(types):
            width = result["by_type"].get(op_type, {"ms": 0.0})["ms"]
            # (matplotlib leaves out labels that start with "_", as oneDNN's kernels do.)
            label = f"\u2009{op_type}" if width and op_type not in labelled else None
            labelled.add(op_type if label else None)
            axis.barh(row, width, left=left, color=plt.cm.tab20(index % 20), label=label)
            left += width
        other = result["op_ms_per_request"] - left
        axis.barh(row, other, left=left, color="lightgrey",
                  label="other op types" if row == 0 else None)
        outside = result["mean_request_ms"] - result["op_ms_per_request"]
        axis.barh(row, outside, left=left + other, color="white", edgecolor="black",
                  hatch="//", label="runtime outside ops" if row == 0 else None)
    axis.set_yticks(range(len(names)), [LABELS.get(name, name) for name in names])
    axis.set_xlabel("ms per batch-1 request (traced)")
    axis.legend(fontsize=7, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.25))
    figure.tight_layout()
    figure.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(figure)
