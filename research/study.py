"""`python -m research.study`: run a study defined in research/configs/.

    python -m research.study pretrain_vs_random --out runs/study [--profile ci]
    python -m research.study pretrain_vs_random --out runs/study --report_only
    python -m research.study pretrain_vs_random --out runs/study --records DIR \
        [--keep_weights] [--arms A,B]
    python -m research.study --list

A study pretrains, fine-tunes every arm on its suite of tasks and writes
`report.md`, `results.json` and `plots/*.png` into --out (see
`research.studies`). Running the same command again skips every finished run
and resumes an interrupted one from its checkpoint, so a killed study loses at
most the run in progress. Start the same command twice to use two cores:
each process takes the runs the other is not running. `--profile ci` runs
the same machinery on a tiny configuration in a few minutes.
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
                             "aside), so a study goes on on a new machine")
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


if __name__ == "__main__":
    sys.exit(main())
