"""Committed records name no folder of the machine that wrote them."""

import json
import os
import sys

from research import portable_paths
from research.studies import records
from tests import shared_data

RECORDS = os.path.join(portable_paths.REPO_ROOT, "research", "records")


def test_machine_paths_become_the_names_the_docs_use(tmp_path):
    out = tmp_path / "study"
    text = "\n".join([
        f"vocab_file: {shared_data.data_path('vocab', 'bert-base-uncased-vocab.txt')}",
        f"init_checkpoint: {out}/pretraining/mlm_nsp",
        f"command: {sys.executable} -m bert_tf.train "
        f"--config {portable_paths.REPO_ROOT}/configs/pretrain/bert_mini.yaml",
        f"reference: {shared_data.reference_path('glue.json')}"])
    assert portable_paths.portable(text, str(out)).splitlines() == [
        "vocab_file: ../shared/data/vocab/bert-base-uncased-vocab.txt",
        "init_checkpoint: OUTPUT_DIR/pretraining/mlm_nsp",
        "command: python -m bert_tf.train --config configs/pretrain/bert_mini.yaml",
        "reference: ../shared/reference/glue.json"]
    assert portable_paths.absolute_paths(portable_paths.portable(text, str(out))) == []


def test_what_is_left_absolute_is_found_and_urls_or_placeholders_are_not():
    text = ("saved to /mnt/disk7/runs/a/ckpt-4; see https://github.com/google-research/bert; "
            'data.train_file="{data_dir}/squad/dev-v1.1.json"; 35.9 ex/s; '
            "samples of /proc/PID/status; OUTPUT_DIR/runs/x")
    assert portable_paths.absolute_paths(text) == ["/mnt/disk7/runs/a/ckpt-4"]


def test_a_saved_record_names_its_study_folder_and_data_portably(tmp_path):
    out, kept = tmp_path / "out", tmp_path / "records"
    run = out / "finetune" / "stsb" / "lr0.0001_seed0"
    run.mkdir(parents=True)
    vocab = shared_data.data_path("vocab", "bert-base-uncased-vocab.txt")
    (run / "params.yaml").write_text(
        f"data:\n  vocab_file: {vocab}\ntrainer:\n  init_checkpoint: {out}/pretraining\n"
        "  train_steps: 10\n")
    (run / "eval_results.json").write_text(json.dumps(
        {"step": 10, "metrics": {"pearson": 0.5}, "model_dir": str(run)}))
    (out / "report.md").write_text(f"Run from `{out}`.\n")
    assert records.save(str(out), str(kept)) == ["finetune/stsb/lr0.0001_seed0"]
    saved = kept / "finetune" / "stsb" / "lr0.0001_seed0"
    assert (saved / "params.yaml").read_text() == (
        "data:\n  vocab_file: ../shared/data/vocab/bert-base-uncased-vocab.txt\n"
        "trainer:\n  init_checkpoint: OUTPUT_DIR/pretraining\n  train_steps: 10\n")
    assert json.loads((saved / "eval_results.json").read_text())["model_dir"] == \
        "OUTPUT_DIR/finetune/stsb/lr0.0001_seed0"
    assert (kept / "report.md").read_text() == "Run from `OUTPUT_DIR`.\n"


def test_no_committed_record_holds_an_absolute_path():
    found = {}
    for folder, _, names in os.walk(RECORDS):
        for name in names:
            path = os.path.join(folder, name)
            try:
                with open(path, encoding="utf-8") as f:
                    text = f.read()
            except UnicodeDecodeError:
                continue  # weights and plots
            paths = portable_paths.absolute_paths(text)
            if paths:
                found[os.path.relpath(path, portable_paths.REPO_ROOT)] = paths[:3]
    assert not found, f"{len(found)} record files hold machine paths, e.g. " + \
        json.dumps(dict(list(found.items())[:5]), indent=1)
