"""The numbers BENCHMARKS.md quotes agree with the records and the code they come from.

BENCHMARKS.md is a table of results: each section gives its command, its machine and a
headline table, and every figure comes from a committed record (`results.json` under
`research/records/`) or from a constant in the code (a test's bound, a harness's default
tolerance). A figure copied by hand goes stale when a record is rerun or a bound changes.
These tests read the records and the code (constants through `ast`, so no TensorFlow
import) and check what the page shows, at the page's rounding:

- the page stays short (at most 450 lines);
- the memory section's bounds are the long test's and the benchmark's own, and its table
  is the record's;
- the parity table's tolerances are the harness's defaults, and its gaps the record's;
- the lost-worker table is the record's, bound included;
- the time-to-train table, its quality summary and the quality table of its NOTES.md
  are the record's, and the count of rows trained to their budget is the config's;
- docs/evidence.md's summary of time to train and of parity quotes the same figures;
- every section names its machine: a section citing a benchmark record names the CPU,
  family and model and the core count of every machine the record lists (or says that the
  record names none), and a section without one says that no record is committed;
- the table of serving an export is the packing record's serve part, machine load included.
"""

import ast
import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "BENCHMARKS.md"
EVIDENCE = ROOT / "docs" / "evidence.md"
RECORDS = ROOT / "research" / "records" / "benchmarks"
MAX_LINES = 450

NUMBER_WORDS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
                "eight": 8, "nine": 9}


# ---- reading the page -------------------------------------------------------------------

def _section(path, title):
    """The text of the section `## title` of a Markdown file, up to the next one."""
    text = path.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def _table(text, first_header):
    """The rows (lists of cells) of the Markdown table whose first header cell is given."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == first_header:
            rows = []
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                rows.append([c.strip() for c in row.strip().strip("|").split("|")])
            return rows
    raise AssertionError(f"no table with the first header {first_header!r}")


def _numbers(cell):
    """The numbers a cell shows, as text: `1,147`, `0.27`, `1.59e-6`, `-0.49`."""
    return re.findall(r"[-+]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?", cell)


def _assert_shown(shown, value, scale=1.0):
    """`shown` (text) is `value * scale` at the rounding the page shows it with."""
    mantissa, _, exponent = shown.replace(",", "").partition("e")
    decimals = len(mantissa.partition(".")[2])
    half_unit = 0.5 * 10.0 ** (-decimals) * 10.0 ** int(exponent or 0)
    assert abs(float(shown.replace(",", "")) - value * scale) <= half_unit * (1 + 1e-9), (
        f"the page shows {shown}, the record gives {value * scale}")


# ---- reading the code -------------------------------------------------------------------

def _constant(path, name):
    """The literal value of the module-level assignment `name = ...` in a Python file."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(
                getattr(target, "id", None) == name for target in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"{path} assigns no {name}")


def _option_default(path, option):
    """The literal `default=` of the `add_argument(option, ...)` call in a Python file."""
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument"
                and node.args and getattr(node.args[0], "value", None) == option):
            for keyword in node.keywords:
                if keyword.arg == "default":
                    return ast.literal_eval(keyword.value)
    raise AssertionError(f"{path} gives {option} no default")


def _record(name):
    return json.loads((RECORDS / name / "results.json").read_text())


def _percent(fraction):
    return f"{fraction:.0%}".replace("%", " %")


# ---- the page ---------------------------------------------------------------------------

def test_benchmarks_md_stays_a_short_table_of_results():
    lines = len(BENCHMARKS.read_text().splitlines())
    assert lines <= MAX_LINES, (
        f"BENCHMARKS.md has {lines} lines (at most {MAX_LINES}): move lab notes into the "
        "record's NOTES.md and keep the command, the machine and the headline table")


# ---- memory of a long pretraining -------------------------------------------------------

def test_memory_section_quotes_the_long_tests_bounds_and_the_benchmarks_criterion():
    text = " ".join(_section(BENCHMARKS, "Memory of a long pretraining").split())
    growth_bound = _constant(ROOT / "research/tests/benchmarks/test_memory_curve.py",
                             "GROWTH_BOUND")
    bench = ROOT / "research/benchmarks/memory_curve.py"
    profiles = _constant(bench, "PROFILES")
    tolerance = _option_default(bench, "--tolerance")
    ci, full = profiles["ci"], profiles["full"]
    assert (f"(`--profile ci`: {ci['train_steps']} steps, "
            f"{ci['train_steps'] // ci['checkpoint_every']} checkpoints and evaluations)") in text
    assert ci["eval_every"] == ci["checkpoint_every"]
    assert (f"bounds anonymous memory against step {ci['warmup_step']}: the end (median of "
            f"the last loop) at most {_percent(growth_bound)} above it, every sample from "
            f"step {ci['warmup_step']} on within {_percent(tolerance)} of it") in text
    assert (f"The criterion: every sample from step {full['warmup_step']} to the end within "
            f"{_percent(tolerance)} of step {full['warmup_step']}.") in text
    assert f"for {full['train_steps']:,} steps at batch {full['batch_size']} x 128" in text


def test_memory_table_is_the_records():
    record = _record("memory_curve")
    section = _section(BENCHMARKS, "Memory of a long pretraining")
    rows = {row[0]: row for row in _table(section, "resident memory")}
    for label, verdict in (("anonymous (RssAnon), judged", record["verdict"]),
                           ("total (VmRSS)", record["verdict_rss"])):
        row = rows[label]
        for cell, key in zip(row[1:4], ("start_mb", "warmup_mb", "end_mb")):
            _assert_shown(_numbers(cell)[0], verdict[key])
        low, high = _numbers(row[4])
        _assert_shown(low, verdict["min_mb"])
        _assert_shown(high, verdict["max_mb"])
        _assert_shown(_numbers(row[5])[0], verdict["end_change"], scale=100)
    _assert_shown(_numbers(rows["anonymous (RssAnon), judged"][5])[1],
                  record["verdict"]["max_change"], scale=100)
    assert record["verdict"]["flat"] and "flat" in rows["anonymous (RssAnon), judged"][5]
    minutes = re.search(r"([\d.]+) min\. Record", " ".join(section.split())).group(1)
    _assert_shown(minutes, record["seconds"] / 60)


# ---- parity with Model Garden -----------------------------------------------------------

def test_parity_table_quotes_the_harness_tolerances_and_the_records_gaps():
    harness = ROOT / "research/benchmarks/parity.py"
    loss_rtol = _option_default(harness, "--loss_rtol")
    weight_tol = _option_default(harness, "--weight_tol")
    record = _record("parity")
    assert (record["settings"]["loss_rtol"], record["settings"]["weight_tol"]) == (
        loss_rtol, weight_tol)
    ours = record["exact"]["verdicts"]["ours"]
    rows = _table(_section(BENCHMARKS, "Parity with Model Garden"), "part")
    losses, weights = rows[0], rows[1]
    for shown, key in zip(_numbers(losses[2]), ("loss", "mlm_loss", "nsp_loss")):
        _assert_shown(shown, ours["max_loss_rel_gap_by_key"][key])
    assert losses[3] == f"{loss_rtol:.0e}".replace("e-0", "e-")
    _assert_shown(_numbers(weights[2])[0], ours["max_weight_abs_diff"])
    limit, tol, summed_rates = _numbers(weights[3])
    _assert_shown(limit, ours["weight_abs_limit"])
    assert float(tol) == weight_tol
    _assert_shown(summed_rates, ours["weight_abs_limit"] / weight_tol)
    assert ours["parity"] and losses[4] == weights[4] == "parity"


def test_evidence_quotes_the_parity_harness_tolerances():
    harness = ROOT / "research/benchmarks/parity.py"
    text = " ".join(_section(EVIDENCE, "Parity with Model Garden").split())
    loss_rtol = _option_default(harness, "--loss_rtol")
    weight_tol = _option_default(harness, "--weight_tol")
    curve_rtol = _option_default(harness, "--curve_rtol")
    assert f"must agree within {loss_rtol:.0e} relative".replace("e-0", "e-") in text
    assert f"within {weight_tol:.0e} x the summed learning rates".replace("e-0", "e-") in text
    assert f"must stay within {_percent(curve_rtol)} of each other" in text


# ---- a lost worker ----------------------------------------------------------------------

def test_lost_worker_table_is_the_records():
    record = _record("lost_worker")
    slack = record["settings"]["slack_seconds"]
    section = _section(BENCHMARKS, "A lost worker")
    text = " ".join(section.split())
    assert f"(timeout + {slack:g} s)" in text and f"the bound (timeout plus {slack:g} s)" in text
    rows = _table(section, "`runtime.worker_timeout_seconds`")
    assert len(rows) == len(record["summary"])
    for row in rows:
        timeout = int(_numbers(row[0])[0])
        signal = "STOP" if row[1].startswith("SIGSTOP") else "KILL"
        summary = record["summary"][f"{timeout}/1/{signal}"]
        assert int(row[2]) == summary["trials"]
        for shown, key in zip(_numbers(row[3]), ("min", "median", "max")):
            _assert_shown(shown, summary[key])
        assert float(row[4]) == summary["bound"] == timeout + slack
        assert summary["ok"] and summary["max"] <= summary["bound"]


# ---- time to train ----------------------------------------------------------------------

# The page's row labels and the record's recipe names.
TIME_TO_TRAIN_ROWS = {
    "paper recipe": "baseline",
    "MLM only (no NSP)": "mlm_only",
    "MLM only, no dropout": "mlm_only_no_dropout",
    "MLM only, no dropout, schedule ending at step 1,600": "combined",
    "no dropout": "no_dropout",
    "no dropout, schedule ending at step 1,600": "no_dropout_lr_1600",
    "schedule ending at step 1,600": "lr_budget_1600",
    "length 64, then 128 (NSP kept)": "seq64_then_128",
    "**best combination: length 64 then 128, no dropout, schedules ending with half the "
    "budget (NSP kept)**": "best_combination",
    "best combination with dropout kept": "best_combination_dropout",
    "best combination with dropout, 64 rows per step at length 64": "small_batch",
    "best combination with dropout, 96 rows per step at length 64": "batch_96",
    "best combination with dropout, 192 rows per step at length 64": "batch_192",
    "best combination with dropout, one schedule across both phases": "one_schedule",
    "best combination with dropout, 350 steps at length 128": "long_phase2",
    "masking 20 %": "mask_20",
    "masking 30 %": "mask_30",
    "masking 40 %": "mask_40",
    "batch 512, LAMB (4 micro-batches of 128)": "lamb_batch512",
}


def _time_to_train():
    results = _record("time_to_train")
    return results, {recipe["name"]: recipe for recipe in results["recipes"]}


def test_time_to_train_table_is_the_records():
    results, recipes = _time_to_train()
    rows = _table(_section(BENCHMARKS, "Time to train"), "recipe")
    assert sorted(TIME_TO_TRAIN_ROWS[row[0]] for row in rows) == sorted(recipes)
    for label, reached, flops, flops_ratio, seconds, minutes, wall_ratio in rows:
        recipe = recipes[TIME_TO_TRAIN_ROWS[label]]
        shown_seconds = _numbers(seconds)
        # One time per phase trained ("0.595 at 64, 1.145 at 128": the figures, then lengths).
        assert len(shown_seconds[::2] if " at " in seconds else shown_seconds) == len(
            recipe["phases"]), label
        for shown, phase in zip(shown_seconds[::2] if " at " in seconds else shown_seconds,
                                recipe["phases"]):
            _assert_shown(shown, phase["seconds_per_step"])
        if recipe.get("steps_to_target") is not None:
            step, low, high = (int(n.replace(",", "")) for n in
                               re.search(r"step ([\d,]+).*\(([\d,]+)-([\d,]+)\)", reached).groups())
            assert (step, [low, high]) == (recipe["steps_to_target"], recipe["bracket"]), label
            _assert_shown(_numbers(flops)[0], recipe["flops_to_target"], scale=1e-15)
            _assert_shown(_numbers(flops_ratio)[0], recipe["flops_vs_reference"])
            _assert_shown(_numbers(minutes)[0], recipe["seconds_to_target"] / 60)
            _assert_shown(_numbers(wall_ratio)[0], recipe["seconds_vs_reference"])
        else:
            assert reached.startswith("not within its") and flops == minutes == "–", label
            last = recipe["curve"][-1]
            value, reference = re.findall(r"([\d.]+) %", reached)
            _assert_shown(value, last["value"], scale=100)
            _assert_shown(reference, recipe["reference_at_same_flops"], scale=100)
            at_step = re.search(r"at step ([\d,]+)", reached)
            if at_step:
                assert int(at_step.group(1).replace(",", "")) == last["step"], label
            budget = sum(phase["steps_budget"] for phase in recipe["phases"])
            assert budget == last["step"], label


def test_time_to_train_method_quotes_the_record_and_the_config():
    results, recipes = _time_to_train()
    text = " ".join(_section(BENCHMARKS, "Time to train").split())
    baseline = recipes["baseline"]
    config = yaml.safe_load((ROOT / "research/configs/time_to_train.yaml").read_text())
    in_config = sum(1 for recipe in _recipes_of(config) if recipe.get("train_to_budget"))
    in_record = sum(1 for recipe in recipes.values() if recipe["train_to_budget"])
    assert in_config == in_record
    count = re.search(r"the (\w+) rows with `train_to_budget: true`", text).group(1)
    assert NUMBER_WORDS[count] == in_record
    _assert_shown(re.search(r"final ([\d.]+) %", text).group(1), results["target"]["value"],
                  scale=100)
    assert (f"budget is {baseline['phases'][0]['steps_budget']:,} steps; it stopped at step "
            f"{baseline['steps_to_target']:,}") in text


def _recipes_of(config):
    """The recipe entries of research/configs/time_to_train.yaml, wherever they sit."""
    found = []

    def walk(node):
        if isinstance(node, dict):
            if "train_to_budget" in node:
                found.append(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(config)
    return found


def _quality(results, recipe, task="stsb", grid="study"):
    (entry,) = [q for q in results["quality"]
                if (q["recipe"], q["task"], q["grid"]) == (recipe, task, grid)]
    return entry


def test_time_to_train_quality_summary_is_the_records():
    results, recipes = _time_to_train()
    text = " ".join(_section(BENCHMARKS, "Time to train").split())
    paper, nearest = _quality(results, "baseline"), _quality(results, "best_combination_dropout")
    shown = re.search(r"target scores STS-B ([\d.]+) ± ([\d.]+)\. The goal, that quality in "
                      r"half its wall time, is not met: no candidate reaches ([\d.]+) "
                      r"\(that mean minus one standard deviation\)\. Nearest: the best "
                      r"combination with dropout kept, ([\d.]+) ± ([\d.]+) at ([\d.]+)x", text)
    assert shown, "the quality summary of Time to train changed its wording"
    mean, std, bar, near_mean, near_std, near_wall = shown.groups()
    _assert_shown(mean, paper["mean"], scale=100)
    _assert_shown(std, paper["std"], scale=100)
    _assert_shown(bar, paper["mean"] - paper["std"], scale=100)
    _assert_shown(near_mean, nearest["mean"], scale=100)
    _assert_shown(near_std, nearest["std"], scale=100)
    _assert_shown(near_wall, recipes["best_combination_dropout"]["seconds_spent_vs_reference"])
    assert results["goal"]["met_by"] == []
    candidates = [_quality(results, c["recipe"]) for c in results["goal"]["candidates"]]
    assert max(c["mean"] for c in candidates) == nearest["mean"] < paper["mean"] - paper["std"]


# The quality table in the record's NOTES.md: its row labels, recipes and checkpoint steps.
QUALITY_ROWS = {
    "paper recipe at the target, step 2,450": ("baseline", 2450),
    "paper recipe, step 1,500": ("baseline_step1500", 1500),
    "paper recipe, step 600": ("baseline_step600", 600),
    "MLM only, no dropout, at the target, step 580": ("mlm_only_no_dropout", 580),
    "MLM only, no dropout, schedule ending at step 1,600, at the target, step 590":
        ("combined", 590),
    "length 64 then 128, at the target, step 1,660 at length 64": ("seq64_then_128", 1660),
    "best combination at the end of its budget, step 2,200 (0.49x the FLOPs)":
        ("best_combination", 2200),
    "the same with dropout kept, at the end of its budget, step 2,200 (0.49x the FLOPs)":
        ("best_combination_dropout", 2200),
    "the same with 96 rows per step at length 64, at the end of its budget, step 2,700 "
    "(0.46x the FLOPs)": ("batch_96", 2700),
    "the same with 192 rows per step at length 64, at the end of its budget, step 1,480 "
    "(0.47x the FLOPs)": ("batch_192", 1480),
    "the same with one schedule across both phases, at the end of its budget, step 2,200 "
    "(0.49x the FLOPs)": ("one_schedule", 2200),
    "the same with 1,650 steps at 64 and 350 at 128, at the end of its budget, step 2,000 "
    "(0.48x the FLOPs)": ("long_phase2", 2000),
}


def test_time_to_train_notes_quality_table_is_the_records():
    results, recipes = _time_to_train()
    rows = _table(_section(RECORDS / "time_to_train" / "NOTES.md", "Quality"), "checkpoint")
    checked = 0
    for label, mlm, *scores in rows:
        if label not in QUALITY_ROWS:
            assert label.startswith("random initialisation"), label
            continue
        name, step = QUALITY_ROWS[label]
        for cell, task in zip(scores, ("stsb", "mrpc", "rte")):
            if not cell:
                continue
            entry = _quality(results, name, task)
            assert entry["checkpoint_step"] == step, label
            mean, std = _numbers(cell)
            _assert_shown(mean, entry["mean"], scale=100)
            _assert_shown(std, entry["std"], scale=100)
        pretrained = recipes[name.split("_step")[0]]
        (at_step,) = [point for point in pretrained["curve"] if point["step"] == step]
        _assert_shown(_numbers(mlm)[0], at_step["value"], scale=100)
        flops = re.search(r"\(([\d.]+)x the FLOPs\)", label)
        if flops:
            _assert_shown(flops.group(1), pretrained["flops_spent_vs_reference"])
        checked += 1
    assert checked == len(QUALITY_ROWS)


def test_evidence_summary_of_time_to_train_quotes_the_record():
    results, recipes = _time_to_train()
    text = " ".join(_section(EVIDENCE, "Time to train").split())
    baseline = recipes["baseline"]
    in_record = sum(1 for recipe in recipes.values() if recipe["train_to_budget"])
    count = re.search(r"(\w+) rows, the best combination and (\w+) variants of it", text)
    assert count, "docs/evidence.md no longer counts the rows trained to their budget"
    assert NUMBER_WORDS[count.group(1).lower()] == in_record
    assert NUMBER_WORDS[count.group(2)] == in_record - 1
    assert f"(here at step {baseline['steps_to_target']:,})" in text
    minutes = re.search(r"steps take ([\d.]+) min of training", text).group(1)
    _assert_shown(minutes, baseline["seconds_to_target"] / 60)


@pytest.mark.parametrize("path", [BENCHMARKS, EVIDENCE], ids=lambda p: p.name)
def test_the_pages_quote_the_target_of_the_record(path):
    results, _ = _time_to_train()
    text = " ".join(_section(path, "Time to train").split())
    assert f"{results['target']['value'] * 100:.2f} %" in text


# ---- the machine of every section -------------------------------------------------------

# How the records' `cpu` field (from /proc/cpuinfo) reads on the page.
CPU_NAMES = {"AMD EPYC": "AMD EPYC", "Intel(R) Xeon(R) Processor": "Intel Xeon"}


def _sections(path):
    """{title: text} of every `## ` section of a Markdown file."""
    text = path.read_text()
    titles = re.findall(r"^## (.+)$", text, flags=re.MULTILINE)
    return {title: _section(path, title) for title in titles}


def _machines(node):
    """Every machine description (`machine`, `machine_start`, ...) anywhere in a record."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key.startswith("machine") and isinstance(value, dict) and "cpu" in value:
                yield value
            else:
                yield from _machines(value)
    elif isinstance(node, list):
        for value in node:
            yield from _machines(value)


def _cited_benchmark_records(section):
    return sorted(set(re.findall(r"research/records/benchmarks/(\w+)/", section)))


@pytest.mark.parametrize("title", list(_sections(BENCHMARKS)))
def test_each_section_names_its_machine(title):
    section = _section(BENCHMARKS, title)
    text = " ".join(section.split())
    records = _cited_benchmark_records(section)
    studies = re.findall(r"research/records/studies/(\w+)/", section)
    if not records and not studies:
        assert "No record is committed" in text, title
        assert re.search(r"AMD EPYC|Intel Xeon|`avx512_bf16`|CPU model not noted", text), title
        return
    if studies and not records:
        assert "the records name no machine" in text, title
        assert "AMD EPYC" in text, title
        return
    for name in records:
        machines = list(_machines(_record(name)))
        if not machines:
            assert "the record names no CPU model" in text, (title, name)
            continue
        for machine in machines:
            assert CPU_NAMES[machine["cpu"]] in text, (title, name, machine)
            if "cpu_family" in machine:
                assert (f"family {machine['cpu_family']} model {machine['cpu_model']}"
                        in text), (title, name, machine)
            cores = machine.get("cpus", machine.get("cpu_count"))
            assert re.search(rf"\b{cores}(-core| (shared |idle )?cores)", text), (title, name)


def test_serving_an_export_table_is_the_packing_records_serve_part():
    serve = _record("packing")["parts"]["serve"]
    section = _section(BENCHMARKS, "Serving an export")
    text = " ".join(section.split())
    _assert_shown(re.search(r"load ([\d.]+) at the end", text).group(1),
                  serve["machine"]["load_average"])
    rows = _table(section, "batch")
    assert sorted(int(row[0]) for row in rows) == sorted(int(b) for b in serve["batches"])
    for batch, ours, garden, ratio, p50 in rows:
        cell = serve["batches"][batch]
        _assert_shown(_numbers(ours)[0], cell["bert_tf"]["texts_per_s"])
        _assert_shown(_numbers(garden)[0], cell["garden"]["texts_per_s"])
        _assert_shown(_numbers(ratio)[0],
                      cell["bert_tf"]["texts_per_s"] / cell["garden"]["texts_per_s"])
        ours_p50, garden_p50 = _numbers(p50)
        _assert_shown(ours_p50, cell["bert_tf"]["p50_ms"])
        _assert_shown(garden_p50, cell["garden"]["p50_ms"])


def test_lost_worker_machine_is_the_records():
    machine = _record("lost_worker")["machine"]
    text = " ".join(_section(BENCHMARKS, "A lost worker").split())
    _assert_shown(re.search(r"load ([\d.]+) at the end", text).group(1),
                  machine["load_average"])
