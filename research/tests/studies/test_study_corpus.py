"""The study corpus: each source cut into documents, held-out documents, resumable build."""

import json

from research.studies import corpus


def test_wikitext_articles_split_on_level_one_headings_only(tmp_path):
    path = tmp_path / "wiki.txt"
    path.write_text(
        " \n = First = \n \n It cost 1 @,@ 000 dollars . It was big . \n"
        " = = Section = = \n The end came . \n"
        " = Second = \n A 3 @.@ 5 km @-@ long road . \n", encoding="utf-8")
    assert corpus.wikitext_documents(str(path)) == [
        ["It cost 1,000 dollars .", "It was big .", "The end came ."],
        ["A 3.5 km-long road ."]]


def test_moby_dick_chapters_are_documents_without_their_headings(tmp_path):
    path = tmp_path / "moby.txt"
    path.write_text("CHAPTER 1. Loomings.\n\nCall me Ishmael. Some years\nago I sailed.\n\n"
                    "Then I rested.\n\nCHAPTER 2. The Carpet-Bag.\n\nI stuffed a shirt.\n",
                    encoding="utf-8")
    assert corpus.moby_dick_documents(str(path)) == [
        ["Call me Ishmael.", "Some years ago I sailed.", "Then I rested."],
        ["I stuffed a shirt."]]


def test_every_nth_document_is_held_out():
    documents = [[f"sentence {i}."] for i in range(7)]
    train, heldout = corpus.split_documents(documents, 3)
    assert heldout == [["sentence 0."], ["sentence 3."], ["sentence 6."]]
    assert train == [["sentence 1."], ["sentence 2."], ["sentence 4."], ["sentence 5."]]


def test_build_corpus_on_the_shared_texts(tmp_path, shared_file):
    shared_file("corpus", "sample_text.txt")
    built = corpus.build_corpus(str(tmp_path / "c"), holdout_every=20, num_shards=2)
    sources = built.manifest["sources"]
    assert list(sources) == list(corpus.SOURCES)
    # One address per document: 233 addresses, every 20th held out.
    assert sources["sotu"]["heldout"]["documents"] == 12
    assert sources["sotu"]["train"]["documents"] == 221
    # The Wikipedia excerpt's 105 articles (tests/data/test_wikipedia.py).
    wiki = sources["wikipedia"]
    assert wiki["train"]["documents"] + wiki["heldout"]["documents"] == 105
    for name in corpus.SOURCES:
        assert sources[name]["heldout"]["documents"] >= 1
    train_text = "".join(open(p, encoding="utf-8").read() for p in built.train_files)
    heldout_text = "".join(open(p, encoding="utf-8").read() for p in built.heldout_files)
    documents = train_text.count("\n\n") + len(built.train_files)
    assert documents == sum(s["train"]["documents"] for s in sources.values())
    # No held-out sentence of an address appears in training (addresses are unique text).
    sotu_heldout = open(tmp_path / "c" / "heldout" / "sotu.txt", encoding="utf-8").read()
    long_lines = [line for line in sotu_heldout.splitlines() if len(line) > 200][:20]
    assert long_lines and not any(line in train_text for line in long_lines)
    assert heldout_text
    # A second build reads the manifest and writes nothing.
    manifest_path = tmp_path / "c" / corpus.MANIFEST
    before = manifest_path.stat().st_mtime_ns
    again = corpus.build_corpus(str(tmp_path / "c"))
    assert again.manifest == json.loads(manifest_path.read_text())
    assert manifest_path.stat().st_mtime_ns == before
