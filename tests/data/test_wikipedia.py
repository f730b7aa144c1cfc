"""Tests for the Wikipedia dump conversion (wikitext cleaning, sentence
splitting, streaming conversion) on a real pages-articles dump."""

import bz2
import re
import subprocess
import sys
import xml.etree.ElementTree as ElementTree

import pytest

from bert_tf.data import corpus, wikipedia
from bert_tf.data.sentence_split import split_sentences
from bert_tf.data.wikitext import remove_nested, wikitext_to_paragraphs

DUMP = ("corpus", "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2")
MARKUP = ["{{", "}}", "[[", "]]", "<ref", "</ref", "|}", "{|", "'''", "''", "==", "&nbsp;", "&amp;"]
HTML_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9]*(?:\s[^<>]*)?/?>")


# --- wikitext cleaning -------------------------------------------------------


def test_nested_templates_and_stray_braces():
    text = "Before {{outer|a={{inner|{{deep}}}}|b}} after }} end {{unclosed tail"
    assert wikitext_to_paragraphs(text) == ["Before after end unclosed tail"]
    assert remove_nested("x{{a{{b}}c}}y", re.compile(r"\{\{|\}\}"), "{{") == "xy"


def test_tables_including_nested_ones_are_removed():
    text = (
        'Intro line.\n{| class="wikitable"\n|-\n! H\n|-\n| cell\n'
        "{|\n| inner\n|}\n|}\nOutro line."
    )
    assert wikitext_to_paragraphs(text) == ["Intro line.", "Outro line."]


def test_refs_comments_and_html_tags():
    text = (
        'Water is H<sub>2</sub>O.<ref name="a">A {{cite web|url=x}} source</ref> '
        'It is wet.<ref name="b" /> <!-- a hidden\nnote --><span style="c">Kept</span>'
        "<br/>text. <math>x^2</math>Done."
    )
    assert wikitext_to_paragraphs(text) == ["Water is H2O. It is wet. Kept text. Done."]


def test_links():
    text = (
        "[[File:X.jpg|thumb|A caption with a [[nested link]] [above].]]"
        "A [[dog]]s life in [[Paris, Texas|]] and [[Lyon|the city]], see [[:Category:Cats]]."
        "[[Category:Dogs]][[de:Hund]] [http://example.com Example site] [http://bare.org]."
    )
    assert wikitext_to_paragraphs(text) == [
        "A dogs life in Paris and the city, see Category:Cats. Example site."
    ]


def test_quotes_headings_lists_entities_and_dropped_sections():
    text = (
        "#REDIRECT [[Somewhere]]\n"
        "'''Bold''' and ''italic'' and '''''both'''''&nbsp;here &amp;ndash; ok.\n"
        "== History ==\n"
        "Some history.\n"
        "* a list item\n# numbered\n; term\n: definition\n"
        "'''Label'''\n"
        "More history.\n"
        "== References ==\n"
        "Smith, J. (2000). A book.\n"
        "=== Sub-section of references ===\n"
        "Also dropped.\n"
        "== Legacy ==\n"
        "__NOTOC__Legacy text."
    )
    assert wikitext_to_paragraphs(text) == [
        "Bold and italic and both here – ok.",
        "Some history.",
        "More history.",
        "Legacy text.",
    ]


# --- sentence splitting --------------------------------------------------------


def test_sentence_splitter_rules():
    text = (
        'Mr. Smith met Dr. Jones in the U.S. capital. They talked, e.g. about J. R. R. '
        'Tolkien! Was it fun? "Yes," he said. "Very." See No. 5 and p. 14 of vol. 2. '
        "It was 1990. Prices rose 3.5 percent... The end came in 300 B.C. and then"
        " it was over (mostly). 2001 was next."
    )
    assert split_sentences(text) == [
        "Mr. Smith met Dr. Jones in the U.S. capital.",
        "They talked, e.g. about J. R. R. Tolkien!",
        "Was it fun?",
        '"Yes," he said.',
        '"Very."',
        "See No. 5 and p. 14 of vol. 2.",
        "It was 1990.",
        "Prices rose 3.5 percent...",
        "The end came in 300 B.C. and then it was over (mostly).",
        "2001 was next.",
    ]


def test_sentence_splitter_keeps_lowercase_continuations():
    assert split_sentences("It costs approx. five dollars. and more") == [
        "It costs approx. five dollars. and more"
    ]
    assert split_sentences("") == []
    assert split_sentences("  One line\nacross lines.  ") == ["One line across lines."]


# --- the real dump ------------------------------------------------------------


def _raw_pages(path):
    """(title, ns, has <redirect>) of every page, parsed independently."""
    pages = []
    for _, element in ElementTree.iterparse(bz2.open(path), events=("end",)):
        if element.tag.endswith("}page"):
            ns = int(element.find("{*}ns").text)
            redirect = element.find("{*}redirect") is not None
            pages.append((element.find("{*}title").text, ns, redirect))
            element.clear()
    return pages


_CONVERTED = {}


@pytest.fixture
def converted_dump(shared_file, tmp_path_factory):
    """Converts the real dump once per session; returns (dump, text path, titles path, stats)."""
    dump = shared_file(*DUMP)
    if dump not in _CONVERTED:
        folder = tmp_path_factory.mktemp("wiki")
        output, titles = str(folder / "wiki.txt"), str(folder / "wiki.titles")
        stats = wikipedia.convert_dump(dump, output, titles_path=titles)
        _CONVERTED[dump] = (dump, output, titles, stats)
    return _CONVERTED[dump]


def _documents(path):
    with open(path, encoding="utf-8") as handle:
        blocks = handle.read().split("\n\n")
    return [block.strip("\n").split("\n") for block in blocks]


def test_every_article_becomes_one_document(converted_dump):
    dump, output, titles_path, stats = converted_dump
    raw = _raw_pages(dump)
    assert len(raw) == 206
    articles = [title for title, ns, redirect in raw if ns == 0 and not redirect]
    assert len(articles) == 106
    with open(titles_path, encoding="utf-8") as handle:
        written = handle.read().splitlines()
    # The only article left without text is a pure list of links.
    assert written == [t for t in articles if t != "List of anthropologists"]
    documents = _documents(output)
    assert len(documents) == len(written) == stats.articles == 105
    assert stats.pages == 206
    assert stats.redirects == 99 and stats.other_namespaces == 1 and stats.too_short == 1
    assert stats.sentences == sum(len(d) for d in documents) > 15000
    by_title = dict(zip(written, documents))
    assert by_title["Anarchism"][0] == (
        "Anarchism is a political philosophy that advocates self-governed societies "
        "based on voluntary institutions."
    )
    assert by_title["Albedo"][0].startswith("Albedo")
    assert all(all(sentence.strip() == sentence and sentence for sentence in d) for d in documents)


def test_no_markup_survives(converted_dump):
    _, output, _, _ = converted_dump
    with open(output, encoding="utf-8") as handle:
        text = handle.read()
    for token in MARKUP:
        assert token not in text, f"{token!r} survived in the converted dump"
    assert not HTML_TAG.search(text), HTML_TAG.search(text)
    assert not re.search(r"\[\[|thumb\||\|\s*\d+px", text)
    assert "\n\n\n" not in text and text.endswith("\n") and not text.startswith("\n")


def test_output_is_readable_by_the_corpus_reader(converted_dump):
    _, output, _, _ = converted_dump
    documents = list(corpus.document_dataset(output))
    assert len(documents) == 105
    assert documents[0][0].numpy().decode("utf-8").startswith("Anarchism is a political")


def test_cli_with_processes_matches_library(converted_dump, tmp_path):
    dump, output, _, _ = converted_dump
    cli_output = tmp_path / "cli.txt"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "bert_tf.wikipedia_to_text",
            "--input",
            dump,
            "--output",
            str(cli_output),
            "--processes",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "pages read: 206, articles written: 105, sentences:" in result.stdout
    with open(output, encoding="utf-8") as expected:
        assert cli_output.read_text(encoding="utf-8") == expected.read()


def test_min_chars_and_bad_input(converted_dump, tmp_path):
    dump, _, _, _ = converted_dump
    stats = wikipedia.convert_dump(dump, str(tmp_path / "long.txt"), min_chars=5000)
    assert 0 < stats.articles < 105
    assert stats.articles + stats.too_short == 106
    with pytest.raises(FileNotFoundError, match="nope.xml.bz2"):
        wikipedia.convert_dump(str(tmp_path / "nope.xml.bz2"), str(tmp_path / "x.txt"))
    bad = tmp_path / "bad.xml"
    bad.write_text("<html><body/></html>", encoding="utf-8")
    with pytest.raises(ValueError, match="expected <mediawiki>"):
        wikipedia.convert_dump(str(bad), str(tmp_path / "x.txt"))
    broken = tmp_path / "broken.xml"
    broken.write_text("<mediawiki><page><title>A</title>", encoding="utf-8")
    with pytest.raises(ValueError, match="not well-formed XML"):
        list(wikipedia.iter_pages(str(broken)))
