"""Tests for bert_tf.data.glue: real SST-2/MRPC/RTE/STS-B files, synthetic files
in the official layouts of the other tasks, errors and submission files."""

import os
import re

import numpy as np
import pytest

from bert_tf.data import glue


def _write_task_file(data_dir, directory, split, lines, prefix=b""):
    """Writes `<data_dir>/<directory>/<split>.tsv` from text lines; returns the path."""
    folder = os.path.join(data_dir, directory)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{split}.tsv")
    with open(path, "wb") as handle:
        handle.write(prefix + "".join(line + "\n" for line in lines).encode("utf-8"))
    return path


# --- task specs -----------------------------------------------------------------

def test_glue_tasks_and_specs():
    assert glue.GLUE_TASKS == ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte",
                               "wnli")
    assert [glue.task_spec(t).directory for t in glue.GLUE_TASKS] == [
        "CoLA", "SST-2", "MRPC", "STS-B", "QQP", "MNLI", "QNLI", "RTE", "WNLI"]
    assert [glue.task_spec(t).metric_names for t in glue.GLUE_TASKS] == [
        ("matthews_corrcoef", "accuracy"), ("accuracy",), ("f1", "accuracy"),
        ("pearson", "spearman"), ("f1", "accuracy"), ("accuracy",), ("accuracy",),
        ("accuracy",), ("accuracy",)]
    assert [glue.task_spec(t).is_pair for t in glue.GLUE_TASKS] == [
        False, False, True, True, True, True, True, True, True]
    mnli = glue.task_spec("mnli")
    assert mnli.label_names == ("entailment", "neutral", "contradiction")
    assert mnli.eval_splits == ("dev_matched", "dev_mismatched")
    assert mnli.test_splits == ("test_matched", "test_mismatched")
    stsb = glue.task_spec("stsb")
    assert stsb.is_regression and stsb.label_names == ()
    assert glue.task_spec("sst2").label_names == ("0", "1")
    assert glue.task_spec("qnli").label_names == ("entailment", "not_entailment")
    assert glue.task_spec("rte").eval_splits == ("dev",)
    assert glue.task_spec("rte").test_splits == ("test",)


def test_unknown_task_lists_the_tasks():
    with pytest.raises(ValueError, match=r"unknown GLUE task 'sst'.*'cola', 'sst2'"):
        glue.task_spec("sst")


def test_split_path_and_unknown_split():
    assert glue.split_path("mnli", "dev_matched", "/g") == "/g/MNLI/dev_matched.tsv"
    assert glue.split_path("sst2", "test", "/g") == "/g/SST-2/test.tsv"
    with pytest.raises(ValueError, match=r"'mnli' has no split 'dev'.*'dev_matched'"):
        glue.split_path("mnli", "dev", "/g")


# --- real files ------------------------------------------------------------------

@pytest.mark.parametrize("task,directory,split,count,labels", [
    ("sst2", "SST-2", "train", 67349, {"0": 29780, "1": 37569}),
    ("sst2", "SST-2", "dev", 872, {"0": 428, "1": 444}),
    ("sst2", "SST-2", "test", 1821, None),
    ("mrpc", "MRPC", "train", 3668, {"0": 1194, "1": 2474}),
    ("mrpc", "MRPC", "dev", 408, {"0": 129, "1": 279}),
    ("mrpc", "MRPC", "test", 1725, None),
    ("rte", "RTE", "train", 2490, {"entailment": 1249, "not_entailment": 1241}),
    ("rte", "RTE", "dev", 277, {"entailment": 146, "not_entailment": 131}),
    ("rte", "RTE", "test", 3000, None),
    ("stsb", "STS-B", "train", 5749, None),
    ("stsb", "STS-B", "dev", 1500, None),
    ("stsb", "STS-B", "test", 1379, None),
])
def test_real_files_row_counts_and_labels(shared_file, task, directory, split, count, labels):
    path = shared_file("glue", directory, f"{split}.tsv")
    examples = glue.read_examples(task, split, os.path.dirname(os.path.dirname(path)))
    assert len(examples) == count
    assert all(isinstance(e.text_a, str) and e.text_a for e in examples)
    assert all((e.text_b is not None) == glue.task_spec(task).is_pair for e in examples)
    if split == "test":
        assert all(e.label is None for e in examples)
        # The test files' index column runs 0..n-1.
        assert [e.guid for e in examples] == [str(i) for i in range(count)]
    elif labels is not None:
        found = {}
        for example in examples:
            found[example.label] = found.get(example.label, 0) + 1
        assert found == labels
        assert examples[-1].guid == f"{split}-{count - 1}"


def _glue_dir(shared_file, directory):
    return os.path.dirname(os.path.dirname(shared_file("glue", directory, "train.tsv")))


def test_sst2_first_and_last_examples(shared_file):
    data_dir = _glue_dir(shared_file, "SST-2")
    dev = glue.read_examples("sst2", "dev", data_dir)
    # The file's text keeps its trailing space (the tokenizer drops it).
    assert dev[0] == glue.GlueExample("dev-0", "it 's a charming and often affecting journey . ",
                                      None, "1")
    assert dev[1] == glue.GlueExample("dev-1", "unflinchingly bleak and desperate ", None, "0")
    assert glue.label_ids("sst2", dev[:2]) == [1, 0]
    test = glue.read_examples("sst2", "test", data_dir)
    assert test[0] == glue.GlueExample("0", "uneasy mishmash of styles and genres .", None, None)
    assert test[-1].guid == "1820"
    assert test[-1].text_a.startswith("dazzling and sugar-sweet , a blast of shallow")


def test_mrpc_bom_does_not_leak_and_quotes_stay_literal(shared_file):
    data_dir = _glue_dir(shared_file, "MRPC")
    with open(shared_file("glue", "MRPC", "train.tsv"), "rb") as handle:
        assert handle.read(4) == b"\xef\xbb\xbfQ"  # the file does start with a BOM
    train = glue.read_examples("mrpc", "train", data_dir)
    assert train[0] == glue.GlueExample(
        "train-0",
        'Amrozi accused his brother, whom he called "the witness", of deliberately distorting '
        'his evidence.',
        'Referring to him as only "the witness", Amrozi accused his brother of deliberately '
        'distorting his evidence.',
        "1")
    dev = glue.read_examples("mrpc", "dev", data_dir)
    # An unbalanced opening quote must not swallow the following lines.
    assert dev[0].text_b == ('"The foodservice pie business does not fit our long-term '
                             'growth strategy.')
    assert dev[0].label == "1"
    assert not any(e.text_a.startswith("\ufeff") for e in train + dev)


def test_rte_first_example(shared_file):
    dev = glue.read_examples("rte", "dev", _glue_dir(shared_file, "RTE"))
    assert dev[0] == glue.GlueExample(
        "dev-0",
        "Dana Reeve, the widow of the actor Christopher Reeve, has died of lung cancer at age 44, "
        "according to the Christopher Reeve Foundation.",
        "Christopher Reeve had an accident.",
        "not_entailment")
    assert glue.label_ids("rte", dev[:1]) == [1]


def test_stsb_scores(shared_file):
    data_dir = _glue_dir(shared_file, "STS-B")
    train = glue.read_examples("stsb", "train", data_dir)
    assert train[0] == glue.GlueExample("train-0", "A plane is taking off.",
                                        "An air plane is taking off.", 5.0)
    assert train[1].label == 3.8
    dev = glue.read_examples("stsb", "dev", data_dir)
    # The last dev row writes its score as a bare "0".
    assert dev[-1].text_a == "New video shows US police officers beating mentally-ill man"
    assert dev[-1].label == 0.0
    scores = glue.label_ids("stsb", dev)
    assert min(scores) == 0.0 and max(scores) == 5.0
    # Sum of the dev score column, from `cut -f10 | awk '{s+=$1}'`.
    assert sum(scores) == pytest.approx(3545.86)
    test = glue.read_examples("stsb", "test", data_dir)
    assert test[0] == glue.GlueExample("0", "A girl is styling her hair.",
                                       "A girl is brushing her hair.", None)


# --- synthetic files in the official layouts -------------------------------------

def test_cola_headerless_train_and_indexed_test(tmp_path):
    _write_task_file(tmp_path, "CoLA", "train", [
        "gj04\t1\t\tThe sailors rode the breeze clear of the rocks.",
        "gj04\t0\t*\tThe more books I ask to whom he will give, the more he reads.",
    ])
    _write_task_file(tmp_path, "CoLA", "test", [
        "index\tsentence",
        "0\tBill whistled past the house.",
        "1\tThe car honked its way down the road.",
    ])
    train = glue.read_examples("cola", "train", str(tmp_path))
    assert train == [
        glue.GlueExample("train-0", "The sailors rode the breeze clear of the rocks.", None, "1"),
        glue.GlueExample("train-1",
                         "The more books I ask to whom he will give, the more he reads.",
                         None, "0"),
    ]
    assert glue.label_ids("cola", train) == [1, 0]
    test = glue.read_examples("cola", "test", str(tmp_path))
    assert test == [glue.GlueExample("0", "Bill whistled past the house.", None, None),
                    glue.GlueExample("1", "The car honked its way down the road.", None, None)]


def test_cola_headerless_row_with_three_columns_fails(tmp_path):
    path = _write_task_file(tmp_path, "CoLA", "dev", [
        "gj04\t1\t\tFine sentence.",
        "gj04\t1\tMissing marker column.",
    ])
    with pytest.raises(ValueError, match=rf"^{re.escape(path)}:2: expected 4 tab-separated columns "
                                         r"\(source, label, original_label, sentence\), got 3$"):
        glue.read_examples("cola", "dev", str(tmp_path))


def test_qqp_layout_uses_id_column_for_test(tmp_path):
    _write_task_file(tmp_path, "QQP", "train", [
        "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate",
        "133273\t213221\t213222\tHow is the life of a math student?\tWhich level of math is "
        "needed?\t0",
        "402555\t536040\t536041\tHow do I control my horny emotions?\tHow do you control your "
        "horniness?\t1",
    ])
    _write_task_file(tmp_path, "QQP", "test", [
        "id\tquestion1\tquestion2",
        "7\tWhy do rockets look white?\tWhy are rockets white?",
    ])
    train = glue.read_examples("qqp", "train", str(tmp_path))
    assert train[1] == glue.GlueExample("train-1", "How do I control my horny emotions?",
                                        "How do you control your horniness?", "1")
    assert glue.label_ids("qqp", train) == [0, 1]
    assert glue.read_examples("qqp", "test", str(tmp_path)) == [
        glue.GlueExample("7", "Why do rockets look white?", "Why are rockets white?", None)]


_MNLI_COMMON = ("index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
                "sentence1_parse\tsentence2_parse\tsentence1\tsentence2")


def test_mnli_columns_found_by_name_in_each_layout(tmp_path):
    # train has label1 + gold_label, dev has label1..label5 + gold_label, test has no labels.
    _write_task_file(tmp_path, "MNLI", "train", [
        _MNLI_COMMON + "\tlabel1\tgold_label",
        "0\t31193\t31193n\tgovernment\t( a )\t( b )\t(ROOT a)\t(ROOT b)\tConceptually cream "
        "skimming has two basic dimensions.\tProduct and geography are what make cream skimming "
        "work.\tneutral\tneutral",
    ])
    _write_task_file(tmp_path, "MNLI", "dev_matched", [
        _MNLI_COMMON + "\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label",
        "0\t63735\t63735n\tslate\tx\ty\tx\ty\tThe new rights are nice enough\tEveryone really "
        "likes the newest benefits\tneutral\tentailment\tneutral\tneutral\tneutral\tneutral",
        "1\t91383\t91383c\tgovernment\tx\ty\tx\ty\tThis site includes a list.\tThe site does "
        "not include a list.\tcontradiction\tcontradiction\tcontradiction\tcontradiction\t"
        "contradiction\tcontradiction",
    ])
    _write_task_file(tmp_path, "MNLI", "test_mismatched", [
        _MNLI_COMMON,
        "9796\t0\t0\tletters\tx\ty\tx\ty\tHello there.\tHi.",
    ])
    train = glue.read_examples("mnli", "train", str(tmp_path))
    assert train == [glue.GlueExample(
        "train-0", "Conceptually cream skimming has two basic dimensions.",
        "Product and geography are what make cream skimming work.", "neutral")]
    dev = glue.read_examples("mnli", "dev_matched", str(tmp_path))
    assert [(e.guid, e.text_a, e.label) for e in dev] == [
        ("dev_matched-0", "The new rights are nice enough", "neutral"),
        ("dev_matched-1", "This site includes a list.", "contradiction")]
    assert glue.label_ids("mnli", dev) == [1, 2]
    assert glue.read_examples("mnli", "test_mismatched", str(tmp_path)) == [
        glue.GlueExample("9796", "Hello there.", "Hi.", None)]


def test_qnli_and_wnli_layouts(tmp_path):
    _write_task_file(tmp_path, "QNLI", "dev", [
        "index\tquestion\tsentence\tlabel",
        "0\tWhat came into force after the new constitution was herald?\tAs of that day, the "
        "new constitution heralding the Second Republic came into force.\tentailment",
    ])
    _write_task_file(tmp_path, "WNLI", "train", [
        "index\tsentence1\tsentence2\tlabel",
        "0\tI stuck a pin through a carrot. When I pulled the pin out, it had a hole.\tThe "
        "carrot had a hole.\t1",
    ])
    _write_task_file(tmp_path, "WNLI", "test", [
        "index\tsentence1\tsentence2",
        "0\tMaria took the cup. It was full.\tThe cup was full.",
    ])
    qnli = glue.read_examples("qnli", "dev", str(tmp_path))
    assert qnli[0].text_a == "What came into force after the new constitution was herald?"
    assert qnli[0].text_b.endswith("came into force.")
    assert glue.label_ids("qnli", qnli) == [0]
    wnli = glue.read_examples("wnli", "train", str(tmp_path))
    assert wnli[0].text_b == "The carrot had a hole." and wnli[0].label == "1"
    assert glue.read_examples("wnli", "test", str(tmp_path))[0].guid == "0"


def test_columns_are_found_by_name_in_any_order(tmp_path):
    _write_task_file(tmp_path, "RTE", "dev", [
        "label\tsentence2\tindex\tsentence1",
        "entailment\tB.\t0\tA.",
    ], prefix=b"\xef\xbb\xbf")
    assert glue.read_examples("rte", "dev", str(tmp_path)) == [
        glue.GlueExample("dev-0", "A.", "B.", "entailment")]


# --- errors ------------------------------------------------------------------------

def test_missing_column_names_file_and_header(tmp_path):
    path = _write_task_file(tmp_path, "RTE", "dev", ["index\tsentence1\tsentence2",
                                                    "0\tA.\tB."])
    with pytest.raises(ValueError, match=rf"^{re.escape(path)}:1: missing column 'label' "
                                         r"needed for the dev split; the header has "
                                         r"\['index', 'sentence1', 'sentence2'\]$"):
        glue.read_examples("rte", "dev", str(tmp_path))


def test_empty_file_is_a_missing_column(tmp_path):
    path = _write_task_file(tmp_path, "SST-2", "dev", [])
    with pytest.raises(ValueError, match=rf"^{re.escape(path)}:1: missing column 'sentence'"):
        glue.read_examples("sst2", "dev", str(tmp_path))


def test_row_with_extra_column_names_line(tmp_path):
    path = _write_task_file(tmp_path, "SST-2", "train", [
        "sentence\tlabel", "good .\t1", "bad\t.\t0"])
    with pytest.raises(ValueError, match=rf"^{re.escape(path)}:3: expected 2 tab-separated columns "
                                         r"\(sentence, label\), got 3$"):
        glue.read_examples("sst2", "train", str(tmp_path))


def test_bad_label_names_file_line_and_choices(tmp_path):
    path = _write_task_file(tmp_path, "MRPC", "dev", [
        "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String",
        "1\t1\t2\tA.\tB.",
        "yes\t3\t4\tC.\tD.",
    ])
    with pytest.raises(ValueError, match=rf"^{re.escape(path)}:3: column 'Quality' holds 'yes'; "
                                         r"expected one of \('0', '1'\)$"):
        glue.read_examples("mrpc", "dev", str(tmp_path))


@pytest.mark.parametrize("score", ["high", "5.5", "-0.1", "nan"])
def test_bad_stsb_score(tmp_path, score):
    path = _write_task_file(tmp_path, "STS-B", "dev", [
        "index\tsentence1\tsentence2\tscore", f"0\tA.\tB.\t{score}"])
    with pytest.raises(ValueError, match=rf"^{re.escape(path)}:2: column 'score' holds '{score}'; "
                                         r"expected a number from 0.0 to 5.0$"):
        glue.read_examples("stsb", "dev", str(tmp_path))


def test_invalid_utf8_names_file_and_line(tmp_path):
    folder = tmp_path / "SST-2"
    folder.mkdir()
    (folder / "dev.tsv").write_bytes(b"sentence\tlabel\ngood .\t1\ncaf\xe9 .\t0\n")
    path = str(folder / "dev.tsv")
    with pytest.raises(ValueError, match=rf"^{re.escape(path)}:3: invalid UTF-8 "
                                         r"\(byte b'\\xe9' at column 4\)"):
        glue.read_examples("sst2", "dev", str(tmp_path))


def test_stray_carriage_return_names_line(tmp_path):
    folder = tmp_path / "SST-2"
    folder.mkdir()
    (folder / "dev.tsv").write_bytes(b"sentence\tlabel\r\ngood .\t1\r\nba\rd .\t0\r\n")
    path = str(folder / "dev.tsv")
    with pytest.raises(ValueError, match=rf"^{re.escape(path)}:3: not a valid TSV line"):
        glue.read_examples("sst2", "dev", str(tmp_path))
    # Windows line ends alone are fine.
    (folder / "dev.tsv").write_bytes(b"sentence\tlabel\r\ngood .\t1\r\n")
    assert glue.read_examples("sst2", "dev", str(tmp_path)) == [
        glue.GlueExample("dev-0", "good .", None, "1")]


def test_label_ids_errors_name_the_guid():
    with pytest.raises(ValueError, match=r"^example dev-1: label 'maybe' is not one of "
                                         r"\('entailment', 'neutral', 'contradiction'\) \(mnli\)$"):
        glue.label_ids("mnli", [glue.GlueExample("dev-0", "a", "b", "neutral"),
                                glue.GlueExample("dev-1", "a", "b", "maybe")])
    with pytest.raises(ValueError, match=r"^example 3: label None is not one of"):
        glue.label_ids("sst2", [glue.GlueExample("3", "a", None, None)])
    with pytest.raises(ValueError, match=r"^example dev-0: label '4.0' is not a score"):
        glue.label_ids("stsb", [glue.GlueExample("dev-0", "a", "b", "4.0")])


# --- submission files -------------------------------------------------------------

def _read_lines(path):
    with open(path, encoding="utf-8", newline="") as handle:
        return handle.read().split("\n")


def test_submission_round_trip_classification(tmp_path):
    _write_task_file(tmp_path, "RTE", "test", [
        "index\tsentence1\tsentence2", "0\tA.\tB.", "1\tC.\tD.", "2\tE.\tF."])
    examples = glue.read_examples("rte", "test", str(tmp_path))
    output = tmp_path / "submission"
    path = glue.write_submission("rte", "test", examples, np.array([1, 0, 1]), str(output))
    assert path == str(output / "RTE.tsv")
    assert _read_lines(path) == ["index\tprediction", "0\tnot_entailment", "1\tentailment",
                                 "2\tnot_entailment", ""]
    assert os.listdir(output) == ["RTE.tsv"]  # no temporary file left behind


def test_submission_stsb_scores_clipped_with_three_decimals(tmp_path):
    examples = [glue.GlueExample(str(i), "a", "b", None) for i in range(4)]
    path = glue.write_submission("stsb", "test", examples, [-0.2, 2.34567, 5.8, np.float32(1.0)],
                                 str(tmp_path))
    assert os.path.basename(path) == "STS-B.tsv"
    assert _read_lines(path) == ["index\tprediction", "0\t0.000", "1\t2.346", "2\t5.000",
                                 "3\t1.000", ""]


def test_submission_file_names():
    names = [glue.submission_file_name(t, s) for t in glue.GLUE_TASKS
             for s in glue.task_spec(t).test_splits]
    assert names == ["CoLA.tsv", "SST-2.tsv", "MRPC.tsv", "STS-B.tsv", "QQP.tsv", "MNLI-m.tsv",
                     "MNLI-mm.tsv", "QNLI.tsv", "RTE.tsv", "WNLI.tsv"]


def test_submission_mnli_mismatched_keeps_file_index(tmp_path):
    examples = [glue.GlueExample("9796", "a", "b", None), glue.GlueExample("9797", "c", "d", None)]
    path = glue.write_submission("mnli", "test_mismatched", examples, [2, 0], str(tmp_path))
    assert os.path.basename(path) == "MNLI-mm.tsv"
    assert _read_lines(path) == ["index\tprediction", "9796\tcontradiction", "9797\tentailment", ""]


def test_submission_rejects_bad_predictions_and_splits(tmp_path):
    examples = [glue.GlueExample("0", "a", None, None), glue.GlueExample("1", "b", None, None)]
    with pytest.raises(ValueError, match=r"^got 1 predictions for 2 examples$"):
        glue.write_submission("sst2", "test", examples, [1], str(tmp_path))
    with pytest.raises(ValueError, match=r"^prediction 1 is 2; expected an integer label id "
                                         r"from 0 to 1$"):
        glue.write_submission("sst2", "test", examples, [1, 2], str(tmp_path))
    with pytest.raises(ValueError, match=r"^prediction 0 is 0.7; expected an integer label id"):
        glue.write_submission("sst2", "test", examples, [0.7, 1], str(tmp_path))
    with pytest.raises(ValueError, match=r"^prediction 1 is nan; expected a finite score$"):
        glue.write_submission("stsb", "test", examples, [1.0, float("nan")], str(tmp_path))
    with pytest.raises(ValueError, match=r"no GLUE submission file for split 'dev' of 'sst2'"):
        glue.write_submission("sst2", "dev", examples, [0, 1], str(tmp_path))
    assert os.listdir(tmp_path) == []  # nothing written by a failed call


def test_submission_replaces_existing_file(tmp_path):
    examples = [glue.GlueExample("0", "a", None, None)]
    glue.write_submission("cola", "test", examples, [0], str(tmp_path))
    path = glue.write_submission("cola", "test", examples, [1], str(tmp_path))
    assert _read_lines(path) == ["index\tprediction", "0\t1", ""]
    assert sorted(os.listdir(tmp_path)) == ["CoLA.tsv"]
