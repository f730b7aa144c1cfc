"""Tests for bert_tf.data.swag on the real 10-row sample and hand-written CSV files."""

import json

import pytest

from bert_tf.data import swag

_HEADER = (",video-id,fold-ind,startphrase,sent1,sent2,gold-source,"
           "ending0,ending1,ending2,ending3,label\n")
_ROW = {"sent1": "A man sits.", "sent2": "He", "ending0": "stands.", "ending1": "runs.",
        "ending2": "eats.", "ending3": "sleeps.", "label": 2}


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def _jsonl(tmp_path, *rows):
    return _write(tmp_path, "rows.jsonl", "".join(json.dumps(row) + "\n" for row in rows))


def test_real_sample(shared_file):
    examples = swag.read_swag(shared_file("swag", "swag_sample_hf_format.jsonl"))
    assert len(examples) == 10
    assert examples[0] == swag.SwagExample(
        example_id="0",
        context="Members of the procession walk down the street holding small horn brass "
                "instruments.",
        start_phrase="A drum line",
        endings=("passes by walking down the street playing their instruments.",
                 "has heard approaching them.",
                 "arrives and they're outside dancing and asleep.",
                 "turns the lead singer watches the performance."),
        label=0,
    )
    assert [e.label for e in examples] == [0, 3, 1, 3, 0, 3, 0, 1, 3, 3]
    assert [e.example_id for e in examples] == [str(i) for i in range(10)]
    assert examples[1].start_phrase == "Members of the procession"


def test_official_csv(tmp_path):
    # A quoted field holding a comma, a quote and a line break, as csv writes them.
    path = _write(tmp_path, "val.csv", _HEADER + (
        '0,anetv_jkn6uvmqwh4,3416,"Members of the procession walk down the street. A drum line",'
        '"Members of the procession walk down the street.",A drum line,gold,'
        'passes by.,"has heard ""them"", loudly.",arrives.,turns.,0\n'
        '7,lsmdc3001_21_JUMP_STREET-422,11783,"He and someone. Someone",He and someone.,Someone,'
        'gen,"looks\nup.",nods.,sits.,waves.,3\n'
    ))
    assert swag.read_swag(path) == [
        swag.SwagExample("0", "Members of the procession walk down the street.", "A drum line",
                         ("passes by.", 'has heard "them", loudly.', "arrives.", "turns."), 0),
        swag.SwagExample("7", "He and someone.", "Someone",
                         ("looks\nup.", "nods.", "sits.", "waves."), 3),
    ]


def test_official_test_csv_without_label_and_reordered_columns(tmp_path):
    path = _write(tmp_path, "test.csv",
                  "ending3,ending2,ending1,ending0,sent2,sent1\nd,c,b,a,He,A man sits.\n")
    assert swag.read_swag(path) == [
        swag.SwagExample("0", "A man sits.", "He", ("a", "b", "c", "d"), None)]


def test_csv_missing_column_names_it(tmp_path):
    path = _write(tmp_path, "val.csv", _HEADER.replace("ending2,", ""))
    with pytest.raises(ValueError, match=r"val\.csv:1: header lacks the column\(s\) ending2"):
        swag.read_swag(path)


def test_csv_wrong_column_count_names_line(tmp_path):
    path = _write(tmp_path, "val.csv", _HEADER + "0,v,1,s,a,b,gold,e0,e1,e2,e3,1\n"
                                                 "1,v,2,s,a,b,gold,e0,e1,e2,2\n")
    with pytest.raises(ValueError, match=r"val\.csv:3: expected 12 columns .* found 11"):
        swag.read_swag(path)


@pytest.mark.parametrize("label", ["4", "-1", "x", ""])
def test_csv_bad_label_names_line(tmp_path, label):
    path = _write(tmp_path, "val.csv", _HEADER + f"0,v,1,s,a,b,gold,e0,e1,e2,e3,{label}\n")
    with pytest.raises(ValueError, match=rf"val\.csv:2: 'label' is '?{label}'?; expected an "
                                         "integer from 0 to 3"):
        swag.read_swag(path)


def test_jsonl_extra_keys_ignored_and_missing_label_is_none(tmp_path):
    unlabelled = {k: v for k, v in _ROW.items() if k != "label"}
    path = _jsonl(tmp_path, dict(_ROW, **{"video-id": "v1", "fold-ind": "5"}), unlabelled)
    assert swag.read_swag(path) == [
        swag.SwagExample("0", "A man sits.", "He", ("stands.", "runs.", "eats.", "sleeps."), 2),
        swag.SwagExample("1", "A man sits.", "He", ("stands.", "runs.", "eats.", "sleeps."), None),
    ]


def test_jsonl_missing_key_names_line_and_key(tmp_path):
    path = _jsonl(tmp_path, _ROW, {k: v for k, v in _ROW.items() if k != "ending3"})
    with pytest.raises(ValueError, match=r"rows\.jsonl:2: missing key 'ending3'"):
        swag.read_swag(path)


@pytest.mark.parametrize("label", [4, -1, True, "1", 1.0])
def test_jsonl_bad_label_names_line(tmp_path, label):
    path = _jsonl(tmp_path, dict(_ROW, label=label))
    with pytest.raises(ValueError, match=r"rows\.jsonl:1: 'label' is .*expected an integer"):
        swag.read_swag(path)


def test_jsonl_malformed_rows(tmp_path):
    path = _write(tmp_path, "rows.jsonl", json.dumps(_ROW) + "\n\n{not json\n")
    with pytest.raises(ValueError, match=r"rows\.jsonl:3: not valid JSON"):
        swag.read_swag(path)
    path = _jsonl(tmp_path, [1, 2])
    with pytest.raises(ValueError, match=r"rows\.jsonl:1: expected a JSON object, found list"):
        swag.read_swag(path)
    path = _jsonl(tmp_path, dict(_ROW, sent2=None))
    with pytest.raises(ValueError, match=r"rows\.jsonl:1: 'sent2' is None; expected a string"):
        swag.read_swag(path)


@pytest.mark.parametrize("name, text, message", [
    ("rows.jsonl", "\n", r"rows\.jsonl: no SWAG examples found"),
    ("val.csv", _HEADER, r"val\.csv: no SWAG examples found"),
    ("val.csv", "", r"val\.csv: empty file"),
    ("val.tsv", _HEADER, r"val\.tsv: unknown SWAG file type '\.tsv'"),
])
def test_empty_or_unknown_files(tmp_path, name, text, message):
    with pytest.raises(ValueError, match=message):
        swag.read_swag(_write(tmp_path, name, text))
