"""Tests for bert_tf.data.squad_reader: SQuAD files read into examples, errors naming the key."""

import json

import pytest

from bert_tf.data import squad, squad_reader

DEV = ("squad", "dev-v1.1.json")
V2_SAMPLE = ("squad", "squad_v2_sample_hf_format.json")


def _write(tmp_path, content, name="squad.json"):
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content), "utf-8")
    return str(path)


def _official(qas, context="Paris is the capital of France.", version="1.1"):
    return {"version": version,
            "data": [{"title": "Paris", "paragraphs": [{"context": context, "qas": qas}]}]}


def test_reads_official_dev_v11(shared_file):
    path = shared_file(*DEV)
    examples, version = squad_reader.read_squad(path)
    assert version == "1.1"
    assert len(examples) == 10570
    first = examples[0]
    assert first.qas_id == "56be4db0acb8001400a502ec"
    assert first.question == "Which NFL team represented the AFC at Super Bowl 50?"
    assert first.title == "Super_Bowl_50"
    assert first.answers == (("Denver Broncos", 177),) * 3
    assert not first.is_impossible
    assert len({e.qas_id for e in examples}) == 10570
    assert len({e.context for e in examples}) == 2067
    for example in examples:
        assert example.answers
        for text, start in example.answers:
            assert example.context[start:start + len(text)] == text


def test_split_by_article_even_and_odd_partition_the_dev_set(shared_file):
    path = shared_file(*DEV)
    seen = []
    everything = squad_reader.split_by_article(path, lambda i: seen.append(i) or True)
    assert seen == list(range(48))
    even = squad_reader.split_by_article(path, lambda i: i % 2 == 0)
    odd = squad_reader.split_by_article(path, lambda i: i % 2 == 1)
    assert (len(even), len(odd)) == (5397, 5173)
    assert len(even) + len(odd) == len(everything) == 10570
    assert {e.title for e in even}.isdisjoint({e.title for e in odd})
    assert even[0].title == "Super_Bowl_50" and odd[0].title == "Warsaw"


def test_reads_flattened_v2_sample_with_impossible_questions(shared_file):
    examples, version = squad_reader.read_squad(shared_file(*V2_SAMPLE))
    assert version == "2.0"
    assert len(examples) == 14
    impossible = [e.qas_id for e in examples if e.is_impossible]
    assert impossible == ["5ad39d53604f3c001a3fe8d3", "5ad39d53604f3c001a3fe8d4",
                          "5ad3a266604f3c001a3fea2b", "5ad5316b5b96ef001a10ab76",
                          "5ad532575b96ef001a10ab7f", "5ad532575b96ef001a10ab80"]
    assert all(e.answers == () for e in examples if e.is_impossible)
    second = examples[1]
    assert second.answers == (
        ("10th and 11th centuries", 94), ("in the 10th and 11th centuries", 87),
        ("10th and 11th centuries", 94), ("10th and 11th centuries", 94))


def test_reads_official_v2_layout_with_plausible_answers(tmp_path):
    qas = [
        {"id": "q1", "question": "What is the capital of France?", "is_impossible": False,
         "answers": [{"text": "Paris", "answer_start": 0}]},
        {"id": "q2", "question": "What is the capital of Spain?", "is_impossible": True,
         "answers": [], "plausible_answers": [{"text": "France", "answer_start": 24}]},
    ]
    examples, version = squad_reader.read_squad(_write(tmp_path, _official(qas, version="v2.0")))
    assert version == "2.0"
    assert examples[0] == squad_reader.SquadExample(
        "q1", "What is the capital of France?", "Paris is the capital of France.",
        (("Paris", 0),), False, "Paris")
    assert examples[1].is_impossible and examples[1].answers == ()
    assert examples[1].plausible_answers == (("France", 24),)


def test_flattened_records_group_into_articles_by_title(tmp_path):
    def record(qid, title):
        return {"id": qid, "title": title, "question": "Who?", "context": "Ann ran.",
                "answers": {"text": ["Ann"], "answer_start": [0]}}

    path = _write(tmp_path, {"data": [record("a", "T1"), record("b", "T1"), record("c", "T2")]})
    assert [e.qas_id for e in squad_reader.split_by_article(path, lambda i: i == 1)] == ["c"]
    examples, version = squad_reader.read_squad(path)
    assert version == "1.1" and [e.title for e in examples] == ["T1", "T1", "T2"]


@pytest.mark.parametrize("qas, key, expected", [
    ([{"id": "q1", "question": "Which?", "answers": [{"text": "Paris"}]}],
     "data[0].paragraphs[0].qas[0].answers[0].answer_start", "missing key 'answer_start'"),
    ([{"id": "q1", "question": "Which?", "answers": [{"text": "Paris", "answer_start": 0}]},
      {"id": "q2", "question": "Which?", "answers": [{"text": "France", "answer_start": 3}]}],
     "data[0].paragraphs[0].qas[1].answers[0]", "is not at answer_start 3"),
    ([{"id": "q1", "question": "Which?", "answers": [{"text": "Paris", "answer_start": "0"}]}],
     "data[0].paragraphs[0].qas[0].answers[0].answer_start", "expected integer, got string '0'"),
    ([{"id": "q1", "answers": []}], "data[0].paragraphs[0].qas[0].question", "missing key"),
    ([{"id": "q1", "question": "Which?", "answers": {"text": "Paris"}}],
     "data[0].paragraphs[0].qas[0].answers", "expected array, got object"),
    ([{"id": "q1", "question": "Which?", "is_impossible": True,
       "answers": [{"text": "Paris", "answer_start": 0}]}],
     "data[0].paragraphs[0].qas[0].answers", "impossible question must have no answers"),
])
def test_malformed_official_file_names_the_key(tmp_path, qas, key, expected):
    path = _write(tmp_path, _official(qas))
    with pytest.raises(squad_reader.SquadFormatError) as error:
        squad_reader.read_squad(path)
    assert str(error.value).startswith(f"{path}: {key}: ")
    assert expected in str(error.value)


def test_repeated_question_id_is_an_error(tmp_path):
    qa = {"id": "q1", "question": "Which?", "answers": [{"text": "Paris", "answer_start": 0}]}
    qas = [qa, qa]
    with pytest.raises(squad_reader.SquadFormatError,
                       match="question id 'q1' appears more than once"):
        squad_reader.read_squad(_write(tmp_path, _official(qas)))


def test_malformed_flattened_record_names_the_key(tmp_path):
    record = {"id": "q1", "question": "Who?", "context": "Ann ran.",
              "answers": {"text": ["Ann", "ran"], "answer_start": [0]}}
    path = _write(tmp_path, {"data": [record]})
    with pytest.raises(squad_reader.SquadFormatError,
                       match=r"data\[0\]\.answers: 2 texts but 1 answer_start"):
        squad_reader.read_squad(path)


def test_invalid_json_names_file_and_line(tmp_path):
    path = _write(tmp_path, '{"data": [\n  {"title": "x",,}\n]}')
    with pytest.raises(squad_reader.SquadFormatError,
                       match=r"squad\.json: not valid JSON at line 2 column"):
        squad_reader.read_squad(path)


def test_missing_data_key_and_missing_file(tmp_path):
    with pytest.raises(squad_reader.SquadFormatError,
                       match=r"squad\.json: data: missing key 'data'"):
        squad_reader.read_squad(_write(tmp_path, {"version": "1.1"}))
    with pytest.raises(FileNotFoundError, match="nothing.json"):
        squad_reader.read_squad(str(tmp_path / "nothing.json"))


def test_the_documented_names_stay_importable_from_bert_tf_data_squad():
    from bert_tf.data import squad_windows

    assert squad.read_squad is squad_reader.read_squad
    assert squad.split_by_article is squad_reader.split_by_article
    assert squad.SquadExample is squad_reader.SquadExample
    assert squad.SquadFormatError is squad_reader.SquadFormatError
    assert squad.create_features is squad_windows.create_features
    assert squad.SquadFeatures is squad_windows.SquadFeatures
