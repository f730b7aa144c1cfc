"""`python -m research.study`: run a study defined in research/configs/.

    python -m research.study pretrain_vs_random --out runs/study [--profile ci]
    python -m research.study pretrain_vs_random --out runs/study --report_only
    python -m research.study pretrain_vs_random --out runs/study --records DIR \
        [--keep_weights] [--arms A,B]
    python -m research.study time_to_train --out DIR [--profile ci] [--recipes A,B] \
        [--target 0.16] [--timing_only | --quality | --report_only]
    python -m research.study time_to_quality --out DIR --units --records DIR \
        [--deadline HH:MM] [--max_units N] [--recipes A,B]
    python -m research.study --list

A study pretrains, fine-tunes every arm on its suite of tasks and writes
`report.md`, `results.json` and `plots/*.png` into --out (see
`research.studies`). Running the same command again skips every finished run
and resumes an interrupted one from its checkpoint, so a killed study loses at
most the run in progress. Start the same command twice to use two cores:
each process takes the runs the other is not running. `--profile ci` runs
the same machinery on a tiny configuration in a few minutes.

`time_to_train` (and its pre-registered second round, `time_to_quality`) is a
benchmark run by the same command: each recipe
pretrains until its held-out MLM accuracy reaches the target or its step
budget ends (see `research.studies.time_to_train`); `--timing_only` measures
every recipe's time per step in one short run, alone on a quiet machine;
`--quality` fine-tunes the reference and the fastest recipe from their
checkpoints at the target, and the reference's checkpoints kept at
`quality.reference_steps` (`research.studies.time_to_train.quality`); `--units`
runs it run by run instead, each pretraining fine-tuned at once and recorded, so it
goes on across machines (`research.studies.time_to_train.run_units`).
"""

import argparse
import logging
import os
import sys
import time

from bert_tf import console


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m research.study", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("study", nargs="?", help="a study in research/configs/ or a YAML path")
    parser.add_argument("--out", help="output directory (resumed when it exists)")
    parser.add_argument("--profile", default="full",
                        help="'full' (default) or a profile of the study file, e.g. 'ci'")
    parser.add_argument("--records", metavar="DIR",
                        help="keep the report and every finished run's record (config, "
                             "evaluation, curves, wall time; no checkpoints) in DIR, e.g. in a "
                             "git repository, and first copy back runs finished there but "
                             "missing or unfinished in --out (an unfinished copy is moved "
                             "aside), so a study goes on on a new machine; time_to_train keeps "
                             "every phase's record and the report there when it ends")
    parser.add_argument("--keep_weights", action="store_true",
                        help="with --records, keep each finished pretraining's final weights "
                             "there too (no optimizer state; about 45 MB for BERT-mini), so "
                             "its fine-tuning runs can go on on a new machine")
    parser.add_argument("--arms", metavar="A,B",
                        help="train only these arms (and the pretraining they need), e.g. "
                             "'minilm' on one machine while another pretrains; the report "
                             "covers every arm")
    parser.add_argument("--report_only", action="store_true",
                        help="train nothing; rewrite the report from the finished runs")
    parser.add_argument("--list", action="store_true", help="list the studies and exit")
    ttt = parser.add_argument_group("time_to_train only")
    ttt.add_argument("--recipes", metavar="A,B",
                     help="train only these recipes, in this order (default: all, in the "
                          "config's order); with --quality, fine-tune only these of the "
                          "recipes it chooses or has fine-tuned before; with --units, only the "
                          "units of these recipes or rows (e.g. baseline_seed0); the report "
                          "covers every recipe")
    ttt.add_argument("--target", type=float,
                     help="the held-out target value (default: the config's target)")
    ttt.add_argument("--timing_only", action="store_true",
                     help="train nothing: time every recipe's steps in one short run on this "
                          "machine (run it alone on a quiet machine) and rewrite the report")
    ttt.add_argument("--quality", action="store_true",
                     help="train no recipe: fine-tune the reference and the fastest recipe "
                          "from their checkpoints at the target, and the reference's "
                          "checkpoints kept at quality.reference_steps (the config's quality: "
                          "section), then rewrite the report")
    ttt.add_argument("--units", action="store_true",
                     help="run unit by unit (needs --records): each run of each recipe is "
                          "pretrained, then at once fine-tuned on every quality task and "
                          "seed, and its records saved; units complete in --records are "
                          "restored and skipped, the reference's units run first, so the "
                          "same command goes on in the next session "
                          "(`research.studies.time_to_train.run_units`)")
    ttt.add_argument("--deadline", metavar="HH:MM",
                     help="with --units: start no unit whose estimated wall time (from the "
                          "complete units in --records) ends after this UTC time")
    ttt.add_argument("--max_units", type=int, metavar="N",
                     help="with --units: run at most N units")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    logging.basicConfig(level=logging.WARNING)
    from bert_tf import config as config_lib
    from research.studies import runner, units
    from research.studies import spec as spec_lib

    if args.list:
        for name in spec_lib.available_studies():
            print(name)
        return 0
    if not args.study or not args.out:
        print("error: give a study name and --out DIR (or --list)", file=sys.stderr)
        return 2
    if args.keep_weights and not args.records:
        print("error: --keep_weights keeps weights in the records: give --records DIR too",
              file=sys.stderr)
        return 2

    try:
        import matplotlib  # noqa: F401  (checked now, not after hours of training)
    except ImportError:
        print("error: the study's plots need matplotlib: pip install matplotlib (it is in "
              "the [test] and [bench] extras)", file=sys.stderr)
        return 2

    def log(message):
        print(f"{time.strftime('%H:%M:%S')} {message}", flush=True)

    started = time.monotonic()
    from research.studies.time_to_train import spec as ttt_spec

    if os.path.isfile(spec_lib.study_path(args.study)) and ttt_spec.is_time_to_train(args.study):
        return _time_to_train(args, log, started)
    if args.recipes or args.target is not None or args.timing_only or args.quality:
        print("error: --recipes, --target, --timing_only and --quality are options of "
              "time_to_train",
              file=sys.stderr)
        return 2
    try:
        spec = spec_lib.load_study(args.study, args.profile)
        arms = [name.strip() for name in args.arms.split(",")] if args.arms else None
        study = runner.Study(spec, args.out, args.profile, log, args.records, arms,
                             args.keep_weights)
        log(f"study {spec.name} (profile {args.profile}) in {study.out_dir}")
        results = study.run(execute=not args.report_only)
    except (config_lib.ConfigError, FileNotFoundError, ValueError, units.UnitFailedError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    done = sum(cell["complete"] for cell in results["finetuning"])
    log(f"{done}/{len(results['finetuning'])} (arm, task) cells complete; this invocation "
        f"took {(time.monotonic() - started) / 60:.1f} min")
    console.print_fields([("report", os.path.join(study.out_dir, "report.md")),
                          ("results", os.path.join(study.out_dir, "results.json")),
                          ("plots", os.path.join(study.out_dir, "plots")),
                          ("TensorBoard", f"tensorboard --logdir {study.out_dir}")])
    return 0


def _time_to_train(args, log, started):
    """The time-to-train benchmark (`research.studies.time_to_train`)."""
    from bert_tf import config as config_lib
    from research.studies import units
    from research.studies.time_to_train import quality, records, report, run_units, runner, timing
    from research.studies.time_to_train import spec as ttt_spec

    if args.arms or args.keep_weights:
        print("error: --arms and --keep_weights are options of the studies, not of "
              "time_to_train", file=sys.stderr)
        return 2
    if args.timing_only + args.report_only + args.quality + args.units > 1:
        print("error: give one of --timing_only, --quality, --report_only and --units",
              file=sys.stderr)
        return 2
    if args.units and not args.records:
        print("error: --units reads and keeps the finished units in --records DIR: give it",
              file=sys.stderr)
        return 2
    if (args.deadline or args.max_units is not None) and not args.units:
        print("error: --deadline and --max_units are options of --units", file=sys.stderr)
        return 2
    try:
        spec = ttt_spec.load(args.study, args.profile)
        recipes = [name.strip() for name in args.recipes.split(",")] if args.recipes else None
        benchmark = runner.Benchmark(spec, args.out, args.profile, log, args.target, recipes)
        log(f"benchmark {spec.name} (profile {args.profile}) in {benchmark.out_dir}; target "
            f"{spec.target.metric} >= {benchmark.target:.4f}")
        if args.units:
            deadline = run_units.parse_deadline(args.deadline) if args.deadline else None
            results = run_units.run(benchmark, args.records, recipes, deadline,
                                    args.max_units)
        elif args.timing_only:
            if args.records:  # the report rewritten after it keeps the complete units
                run_units.restore(benchmark, args.records, log)
            benchmark.check_same_measurement()
            timing.measure(benchmark, log)
            results = report.write(benchmark)
        elif args.quality:
            built = report.build(benchmark)
            # --recipes may also name a recipe fine-tuned earlier (an earlier fastest), to
            # bring its cells up to a grid added since.
            recipes = ([name for name in quality.recipes_to_show(benchmark, built)
                        if name in recipes] if recipes
                       else quality.chosen_recipes(benchmark, built))
            log("fine-tuning at the target: "
                + (", ".join(recipes) or "none (no recipe asked for has reached the target)"))
            quality.QualityStudy(benchmark, recipes).cells(execute=True)
            results = report.write(benchmark)
        elif args.report_only:
            results = report.write(benchmark)
        else:
            results = benchmark.run()
        if args.records and not args.units:  # the units saved theirs as they ended
            recorded = records.save(benchmark, args.records)
            log(f"records of {len(recorded)} phases and the report in {args.records}")
    except (config_lib.ConfigError, FileNotFoundError, ValueError, units.UnitFailedError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    counts = {}
    for recipe in results["recipes"]:
        counts[recipe["status"]] = counts.get(recipe["status"], 0) + 1
    log(f"recipes: {', '.join(f'{n} {status}' for status, n in counts.items())}; this "
        f"invocation took {(time.monotonic() - started) / 60:.1f} min")
    console.print_fields([("report", os.path.join(benchmark.out_dir, report.REPORT_FILE)),
                          ("results", os.path.join(benchmark.out_dir, report.RESULTS_FILE)),
                          ("plots", os.path.join(benchmark.out_dir, report.PLOTS_DIR))])
    return 0


if __name__ == "__main__":
    sys.exit(main())
