"""The benchmark's durable records: every phase's curves and config, without checkpoints.

A recipe's phases may train over several sessions (and machines), and a phase
that reached the target was stopped early, so a record is kept for every
phase that has evaluated, finished or not: its resolved config, its newest
evaluation, its wall times and its curves as `scalars.json`
(`research.studies.records`). With `timing.json`, `report.md`,
`results.json`, `budgets.json`, the plots and the fine-tuning runs of `--quality` (the study
records of `quality/`), `--report_only --out <records>` rebuilds the report
from the records alone.
"""

import os

from research import portable_paths
from research.studies import records as study_records
from research.studies import scalars
from research.studies.time_to_train import quality, report, runner, timing


def save(benchmark, records_dir: str) -> list[str]:
    """Copies the report and the record of every phase that has evaluated into `records_dir`.

    Args:
      benchmark: a `runner.Benchmark`.
      records_dir: where the records go (created if missing); files already equal are
        left alone.

    Returns:
      The recorded phase folders, relative to the benchmark's output directory.
    """
    out_dir = benchmark.out_dir
    # Records name no folder of this machine (`research.portable_paths`).
    rewrite = portable_paths.rewriter(out_dir)
    recorded = []
    for recipe in benchmark.spec.recipes:
        for phase in recipe.phases:
            run = os.path.relpath(benchmark.phase_dir(recipe, phase), out_dir)
            if scalars.event_files(os.path.join(out_dir, run)):
                study_records.copy_run(out_dir, records_dir, run, rewrite)
                recorded.append(run)
    for name in (report.RESULTS_FILE, report.REPORT_FILE, timing.TIMING_FILE,
                 runner.BUDGETS_FILE):
        if os.path.isfile(os.path.join(out_dir, name)):
            study_records.copy_if_changed(os.path.join(out_dir, name),
                                          os.path.join(records_dir, name), rewrite)
    plots = os.path.join(out_dir, report.PLOTS_DIR)
    if os.path.isdir(plots):
        for name in sorted(os.listdir(plots)):
            study_records.copy_if_changed(os.path.join(plots, name),
                                          os.path.join(records_dir, report.PLOTS_DIR, name))
    tuned = os.path.join(out_dir, quality.QUALITY_DIR)
    if os.path.isdir(tuned):
        study_records.save(tuned, os.path.join(records_dir, quality.QUALITY_DIR),
                           output_dir=out_dir)
    return recorded
