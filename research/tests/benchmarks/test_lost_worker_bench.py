"""`python -m research.bench lost_worker`: its summary and report (the trials are the long
test in tests/training/test_strategies.py, which kills a worker the same way)."""

from research.benchmarks import lost_worker


def _trial(seconds, exit_code=75, signal="KILL", victim=1, timeout=3):
    return {"timeout": timeout, "victim": victim, "signal": signal, "seconds": seconds,
            "exit_code": exit_code, "error_lines": ["error: lost worker 1 (localhost:1) ..."],
            "traceback": False}


def test_summary_holds_only_when_every_survivor_exits_75_within_the_bound():
    summary = lost_worker.summarize(
        [_trial(1.0), _trial(4.5), _trial(2.0, signal="STOP"), _trial(6.0, signal="STOP")],
        slack=2.0)
    assert summary["3/1/KILL"]["median"] == 2.75 and summary["3/1/KILL"]["ok"]
    assert summary["3/1/STOP"]["max"] == 6.0 and not summary["3/1/STOP"]["ok"]  # > 3 + 2
    assert not lost_worker.summarize([_trial(1.0, exit_code=1)], slack=2.0)["3/1/KILL"]["ok"]


def test_report_has_a_row_per_timeout_victim_and_signal(tmp_path):
    trials = [_trial(1.0), _trial(3.5, signal="STOP", victim=0)]
    results = {"summary": lost_worker.summarize(trials, 2.0), "trials": trials,
               "machine": {"cpus": 2, "cpu": "cpu", "load_average": 1.0},
               "wall_seconds": 10, "date": "2026-11-26"}
    lost_worker.write_report(results, tmp_path)
    report = (tmp_path / "report.md").read_text()
    assert "| 3 | worker 1 | SIGKILL | 1 | 1.0 | 1.0 | 1.0 | 5 | yes |" in report
    assert "| 3 | worker 0 (coordination leader) | SIGSTOP | 1 | 3.5 |" in report
    assert "error: lost worker 1 (localhost:1)" in report
