"""The pre-registered quality verdict: candidate minus reference, with a hierarchical bootstrap.

An arm's score on a task is the mean over its pretraining runs of each run's mean over
its fine-tuning seeds (every run weighs the same). Its uncertainty has two levels, the
pretraining run (init and data order) and the fine-tuning seed, so the bootstrap resamples
both: in each of `resamples` draws, an arm's runs are drawn with replacement, then within
each drawn run its seeds with replacement; candidate and reference are drawn apart. The
interval is the `confidence` percentile interval of (candidate - reference) over the draws,
from a generator seeded with `seed`, so the same scores always give the same interval.

A candidate keeps quality when, on every task, the interval's lower bound is above
-`margin` points (scores are in points, x 100 of the stored fractions).
"""

import dataclasses
from collections.abc import Sequence

import numpy as np

# An arm's scores on one task: one list of fine-tuning seed scores per pretraining run.
RunScores = Sequence[Sequence[float]]


@dataclasses.dataclass(frozen=True)
class Difference:
    """Candidate minus reference on one task, in points, with its bootstrap interval."""

    task: str
    difference: float
    low: float
    high: float
    candidate_mean: float
    reference_mean: float


def arm_mean(runs: RunScores) -> float:
    """The mean over runs of each run's mean over its seeds."""
    return float(np.mean([np.mean(seeds) for seeds in runs]))


def _check(runs: RunScores, what: str) -> list[np.ndarray]:
    arrays = [np.asarray(seeds, dtype=float) for seeds in runs]
    if not arrays or any(array.ndim != 1 or array.size == 0 for array in arrays):
        raise ValueError(f"{what}: needs at least one pretraining run, each with at least one "
                         f"fine-tuning score; got {[list(a) for a in arrays]}")
    return arrays


def _resampled_means(runs: list[np.ndarray], resamples: int,
                     rng: np.random.Generator) -> np.ndarray:
    """[resamples] arm means, each over runs drawn with replacement and their seeds so."""
    count = len(runs)
    drawn_runs = rng.integers(0, count, size=(resamples, count))  # [B, R]
    run_means = np.empty((resamples, count))
    for position in range(count):
        for index, seeds in enumerate(runs):
            rows = np.flatnonzero(drawn_runs[:, position] == index)
            draws = rng.integers(0, seeds.size, size=(rows.size, seeds.size))
            run_means[rows, position] = seeds[draws].mean(axis=1)
    return run_means.mean(axis=1)


def bootstrap_difference(candidate: RunScores, reference: RunScores, *, task: str = "",
                         resamples: int = 10000, confidence: float = 0.90,
                         seed: int = 0) -> Difference:
    """Candidate minus reference (points), with a hierarchical bootstrap interval.

    Args:
      candidate: the candidate's seed scores per pretraining run, in points.
      reference: the reference's, likewise.
      task: the task's name, kept in the result.
      resamples: bootstrap draws.
      confidence: the interval's coverage, e.g. 0.90 for the 5th to 95th percentiles.
      seed: seeds the draws.

    Raises:
      ValueError: an arm without runs or a run without scores, or bad settings.
    """
    if resamples < 1 or not 0 < confidence < 1:
        raise ValueError(f"resamples must be >= 1 and confidence in (0, 1), got {resamples} "
                         f"and {confidence}")
    candidate_runs = _check(candidate, f"task {task!r} candidate")
    reference_runs = _check(reference, f"task {task!r} reference")
    rng = np.random.default_rng(seed)
    differences = (_resampled_means(candidate_runs, resamples, rng)
                   - _resampled_means(reference_runs, resamples, rng))
    tail = (1 - confidence) / 2
    low, high = np.quantile(differences, [tail, 1 - tail])
    candidate_mean, reference_mean = arm_mean(candidate_runs), arm_mean(reference_runs)
    return Difference(task=task, difference=candidate_mean - reference_mean, low=float(low),
                      high=float(high), candidate_mean=candidate_mean,
                      reference_mean=reference_mean)


def keeps_quality(differences: Sequence[Difference], margin: float) -> bool:
    """Whether every task's lower bound is above -`margin` points."""
    return all(d.low > -margin for d in differences)


def judge(candidate: dict[str, RunScores], reference: dict[str, RunScores],
          tasks: Sequence[str], *, margin: float = 1.0, resamples: int = 10000,
          confidence: float = 0.90, seed: int = 0) -> dict:
    """The verdict on one candidate over `tasks`.

    Args:
      candidate: `{task: seed scores per pretraining run}` in points (a task missing or
        empty: not fine-tuned yet).
      reference: the reference's, likewise.
      tasks: the tasks every candidate must hold.
      margin: the largest loss allowed at the interval's lower bound, in points.
      resamples, confidence, seed: see `bootstrap_difference`.

    Returns:
      `{"differences": [Difference as dict], "missing": [tasks], "keeps_quality": bool or
      None}`: None while a task lacks scores, unless a finished task already fails.
    """
    differences, missing = [], []
    for task in tasks:
        if not candidate.get(task) or not reference.get(task):
            missing.append(task)
            continue
        differences.append(bootstrap_difference(
            candidate[task], reference[task], task=task, resamples=resamples,
            confidence=confidence, seed=seed))
    kept = keeps_quality(differences, margin)
    return {"differences": [dataclasses.asdict(d) for d in differences], "missing": missing,
            "keeps_quality": (False if not kept else None if missing else True)}
