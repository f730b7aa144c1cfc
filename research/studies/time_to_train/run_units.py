"""The benchmark run unit by unit: one pretraining run, then at once its fine-tuning.

A machine's disk does not outlive its session, and a pretraining's checkpoints are
not committed, so a run's fine-tuning must finish in the session that pretrained
it. A *unit* is one row of the benchmark (one run of one recipe: `<recipe>_seed<k>`
for a recipe with replicates): its phases pretrained (`runner.Benchmark.run_recipe`),
then, if its recipe is fine-tuned (the reference's rows and `quality.recipes`), every
task of `quality.tasks` on every seed (`quality.QualityStudy` restricted to that row),
then the report rewritten and the records saved (`records.save`).

A unit is complete when the records hold its finished phases and every one of its
fine-tuning cells complete. `run` first copies back every complete unit's records
into the output directory (the report, the target and the budgets read them there),
with the timing run and the fixed budgets, then runs the units that are not
complete, the reference's first (their runs set the target and the candidates'
budgets), so the same command goes on with the next unit in the next session. An
incomplete unit is never partly restored: what it left in the records came from a
checkpoint now gone, so it is pretrained and fine-tuned again whole (same config,
corpus and seeds), its records replaced run by run in the same order.

The same command started twice (one process per core) shares the units: the second
waits while the first pretrains, then each takes the fine-tuning runs the other is not
running (`research.studies.units.TrainUnit`'s locks).

A recipe with `wall_fraction` cannot start before every reference unit is complete
and the timing run (`--timing_only`) exists: its steps are fixed from both
(`runner.Benchmark.fill_budget_steps`, kept in `budgets.json`).
"""

import datetime
import os
import shutil
import statistics
import time
from collections.abc import Callable, Sequence

from research.studies import records as study_records
from research.studies import units
from research.studies.time_to_train import quality, records, runner, timing

# Files of the output directory that a complete unit's successors need.
_SHARED_FILES = (timing.TIMING_FILE, runner.BUDGETS_FILE)
# Held while the report is written and the records saved.
REPORT_LOCK = "report.lock"


class UnitWaitsError(ValueError):
    """The next unit needs something that is not there yet (a reference unit, the timing run)."""


def unit_rows(spec, names: Sequence[str] | None = None) -> list:
    """The benchmark's rows in the order their units run: the reference's, then the rest.

    Args:
      spec: a `TimeToTrainSpec`.
      names: rows or recipes (a recipe stands for its replicates) to keep; None: all.

    Raises:
      ValueError: a name is neither a row nor a recipe.
    """
    rows = spec.reference_rows() + [row for row in spec.recipes
                                    if row.group != spec.reference_recipe]
    if not names:
        return rows
    unknown = sorted(set(names) - {row.name for row in rows} - {row.group for row in rows})
    if unknown:
        raise ValueError(f"unknown recipe(s) {', '.join(map(repr, unknown))} of {spec.name!r}")
    return [row for row in rows if row.name in names or row.group in names]


def is_finetuned(spec, row) -> bool:
    """Whether a row's unit fine-tunes it: a reference row, or a row of `quality.recipes`."""
    return (row.group == spec.reference_recipe or row.name in spec.quality.recipes
            or row.group in spec.quality.recipes)


def _quality_study(benchmark, row):
    """The fine-tuning of one row (with the reference's step arms on the reference's row)."""
    step_arms = row.name == benchmark.spec.reference_row().name
    return quality.QualityStudy(benchmark, [row.name], step_arms=step_arms)


def _phase_folder(root: str, row, phase) -> str:
    return os.path.join(root, "runs", row.name, phase.name)


def _finetune_folder(root: str, arm: str) -> str:
    return os.path.join(root, quality.QUALITY_DIR, "finetune", arm)


def pretrained(benchmark, row) -> bool:
    """Whether the row's pretraining is done in the benchmark's folder: every phase trained
    to its last step, or (without `train_to_budget`) up to the phase that reached the target.
    """
    for phase in row.phases:
        state = benchmark.phase_state(row, phase)
        if state == "open":
            return False
        if state == "reached" and not row.train_to_budget:
            return True
    return True


def unit_complete(benchmark, records_dir: str, row) -> bool:
    """Whether the records hold the unit of `row` whole: its pretraining done (`pretrained`)
    and, if the row is fine-tuned, every one of its fine-tuning cells complete.

    Args:
      benchmark: a `runner.Benchmark`.
      records_dir: its records.
      row: one of its spec's recipes.
    """
    # Read in the records as in an output directory: nothing is trained or built there.
    reader = benchmark.reading(records_dir)
    if not pretrained(reader, row):
        return False
    if not is_finetuned(benchmark.spec, row):
        return True
    return all(cell["complete"] for cell in _quality_study(reader, row).cells(execute=False))


def _unit_arms(benchmark, row) -> list[str]:
    """The fine-tuning arms of a row's unit (its own, and any step arms it carries)."""
    if not is_finetuned(benchmark.spec, row):
        return []
    return [arm.name for arm in _quality_study(benchmark, row).spec.arms]


def restore(benchmark, records_dir: str, log: Callable[[str], None] = print) -> list[str]:
    """Copies every complete unit's records, the timing run and the budgets into the output
    directory where it lacks them; returns the units restored.

    A run already finished in the output directory is left alone
    (`research.studies.records.restore`); an incomplete unit's records are not copied.
    """
    out_dir = benchmark.out_dir
    restored = []
    for row in unit_rows(benchmark.spec):
        if not unit_complete(benchmark, records_dir, row):
            continue
        folders = [os.path.join("runs", row.name)] + [
            os.path.relpath(_finetune_folder(out_dir, arm), out_dir)
            for arm in _unit_arms(benchmark, row)]
        copied = [run for folder in folders
                  for run in study_records.restore(os.path.join(records_dir, folder),
                                                   os.path.join(out_dir, folder), log)]
        if copied:
            restored.append(row.name)
    for name in _SHARED_FILES:
        source, target = os.path.join(records_dir, name), os.path.join(out_dir, name)
        if os.path.isfile(source) and not os.path.isfile(target):
            os.makedirs(out_dir, exist_ok=True)
            shutil.copyfile(source, target)
    if restored:
        log(f"restored the complete units {', '.join(restored)} from {records_dir}")
    return restored


def unit_seconds(records_dir: str, spec, row) -> float:
    """The wall time a unit's records hold: its phases' and its fine-tuning runs' times."""
    total = sum(units.wall_seconds(_phase_folder(records_dir, row, phase))
                for phase in row.phases)
    if is_finetuned(spec, row):
        for folder, _, files in os.walk(_finetune_folder(records_dir, row.name)):
            if units.TIMES_FILE in files:
                total += units.wall_seconds(folder)
    return total


def estimated_seconds(benchmark, records_dir: str, row) -> float | None:
    """A unit's expected wall time: the mean of its recipe's complete units in the records,
    else of the reference's (a candidate trains for a share of the reference's time, so
    that bounds it); None without any complete unit to go by. Machines differ between
    sessions: an estimate, not a measurement."""
    spec = benchmark.spec
    for group in (row.group, spec.reference_recipe):
        seconds = [unit_seconds(records_dir, spec, other) for other in spec.replicates(group)
                   if unit_complete(benchmark, records_dir, other)]
        if seconds:
            return statistics.fmean(seconds)
    return None


def _check_ready(benchmark, records_dir: str, row) -> None:
    """Raises UnitWaitsError when `row` has a wall-time budget not yet fixable."""
    if not row.wall_fraction or row.group in benchmark.fixed_budgets():
        return
    spec = benchmark.spec
    waiting = [other.name for other in spec.reference_rows()
               if not unit_complete(benchmark, records_dir, other)]
    if waiting:
        raise UnitWaitsError(f"unit {row.name} waits for the reference's units "
                             f"{', '.join(waiting)}: run them first")
    if timing.read(benchmark.out_dir) is None:
        raise UnitWaitsError(
            f"unit {row.name} needs the timing run first: python -m research.study "
            f"{spec.name} --out {benchmark.out_dir} --timing_only --records {records_dir} "
            "(alone on a quiet machine)")
    benchmark.fill_budget_steps(row)


def _held_elsewhere(benchmark, row) -> bool:
    """Whether another process holds the lock of one of the row's phases (is training it)."""
    for phase in row.phases:
        folder = benchmark.phase_dir(row, phase)
        if not os.path.isdir(folder):
            continue
        with units.lock_file(os.path.join(folder, units.LOCK_FILE), wait=False) as lock:
            if lock is None:
                return True
    return False


def _pretrain(benchmark, row, poll_seconds: float) -> None:
    """Trains the row's phases; waits while another process of the benchmark holds one."""
    waiting = False
    while True:
        if not (waiting and _held_elsewhere(benchmark, row)):
            benchmark.run_recipe(row)
        if pretrained(benchmark, row):
            return
        if not waiting:
            benchmark.log(f"unit {row.name}: its pretraining runs in another process; "
                          f"waiting (checking every {poll_seconds:g} s)")
            waiting = True
        time.sleep(poll_seconds)


def _finetune(benchmark, row, poll_seconds: float) -> None:
    """Fine-tunes the row on every task and seed; runs held by another process of the
    benchmark (the same command started twice shares them) are waited for."""
    study, waiting = _quality_study(benchmark, row), False
    while not all(cell["complete"] for cell in study.cells(execute=True)):
        if not waiting:
            benchmark.log(f"unit {row.name}: waiting for fine-tuning runs in another process "
                          f"(checking every {poll_seconds:g} s)")
            waiting = True
        time.sleep(poll_seconds)


def run_unit(benchmark, records_dir: str, row, poll_seconds: float = 30.0) -> None:
    """Pretrains `row`, fine-tunes it on every quality task and seed, saves the records.

    Another process running the same units (the same command started twice, one per
    core) shares them: each takes the runs the other is not running, and waits for the
    others before the unit is recorded complete.
    """
    benchmark.log(f"=== unit {row.name}")
    _pretrain(benchmark, row, poll_seconds)
    save(benchmark, records_dir)
    if is_finetuned(benchmark.spec, row):
        _finetune(benchmark, row, poll_seconds)
    save(benchmark, records_dir)
    benchmark.log(f"=== unit {row.name}: complete, records in {records_dir}")


def save(benchmark, records_dir: str) -> dict:
    """Rewrites the report and saves the records, one process of the benchmark at a time
    (two sharing the units end a unit together); returns the results."""
    from research.studies.time_to_train import report

    os.makedirs(benchmark.out_dir, exist_ok=True)
    with units.lock_file(os.path.join(benchmark.out_dir, REPORT_LOCK), wait=True):
        results = report.write(benchmark)
        records.save(benchmark, records_dir)
    return results


def _seconds_left(deadline: datetime.datetime | None) -> float | None:
    if deadline is None:
        return None
    return (deadline - datetime.datetime.now(datetime.timezone.utc)).total_seconds()


def parse_deadline(text: str, now: datetime.datetime | None = None) -> datetime.datetime:
    """The next UTC time `HH:MM` after `now` (today's, or tomorrow's when it has passed).

    Raises:
      ValueError: not `HH:MM`.
    """
    now = now or datetime.datetime.now(datetime.timezone.utc)
    clock = datetime.datetime.strptime(text, "%H:%M").time()
    deadline = datetime.datetime.combine(now.date(), clock, tzinfo=datetime.timezone.utc)
    return deadline if deadline > now else deadline + datetime.timedelta(days=1)


def run(benchmark, records_dir: str, names: Sequence[str] | None = None,
        deadline: datetime.datetime | None = None, max_units: int | None = None) -> dict:
    """Runs every unit not complete in the records, in order; returns the results.

    Args:
      benchmark: a `runner.Benchmark`.
      records_dir: the records (complete units are read and restored from there).
      names: rows or recipes to run (None: all).
      deadline: start no unit whose estimated wall time (`estimated_seconds`) ends after it.
      max_units: run at most this many units (None: no limit).

    Raises:
      UnitWaitsError: the next unit needs a reference unit or the timing run first.
    """
    records_dir = os.path.abspath(records_dir)
    spec = benchmark.spec
    benchmark.check_same_measurement()
    restore(benchmark, records_dir, benchmark.log)
    ran = 0
    for row in unit_rows(spec, names):
        if unit_complete(benchmark, records_dir, row):
            continue
        if max_units is not None and ran >= max_units:
            benchmark.log(f"next unit: {row.name} (--max_units {max_units} reached)")
            break
        _check_ready(benchmark, records_dir, row)
        needed, left = estimated_seconds(benchmark, records_dir, row), _seconds_left(deadline)
        if needed is not None and left is not None and needed > left:
            benchmark.log(f"next unit: {row.name}, not started: it takes about "
                          f"{needed / 3600:.2f} h, {max(left, 0) / 3600:.2f} h are left "
                          "before the deadline")
            break
        run_unit(benchmark, records_dir, row)
        ran += 1
    results = save(benchmark, records_dir)
    rows = unit_rows(spec)
    left = [row.name for row in rows if not unit_complete(benchmark, records_dir, row)]
    benchmark.log(f"units complete in the records: {len(rows) - len(left)}/{len(rows)}"
                  + (f"; next: {left[0]}" if left else ""))
    return results
