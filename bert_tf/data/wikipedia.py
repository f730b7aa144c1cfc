"""Converts a MediaWiki pages-articles dump into BERT's corpus format.

The output has one sentence per line and a blank line between documents; each
article (main namespace, not a redirect, with some text left after cleaning)
is one document. The XML is streamed with `xml.etree.ElementTree.iterparse`
from the compressed file and each page is released once converted, so memory
stays bounded by the largest page whatever the size of the dump. Cleaning can
run in worker processes; pages are handed out in bounded batches and written
back in dump order, so the output does not depend on the number of processes.
"""

import bz2
import dataclasses
import gzip
import multiprocessing
import sys
import time
import xml.etree.ElementTree as ElementTree

from bert_tf import storage
from bert_tf.data.sentence_split import split_sentences
from bert_tf.data.wikitext import wikitext_to_paragraphs

ARTICLE_NAMESPACE = 0

# Pages handed to the worker pool at once, per process: enough to keep the
# workers busy, small enough that memory stays bounded.
_PAGES_PER_PROCESS_BATCH = 32


@dataclasses.dataclass(frozen=True)
class Page:
    """One `<page>` of a dump: its title, namespace, redirect flag and wikitext."""

    title: str
    namespace: int
    redirect: bool
    text: str


@dataclasses.dataclass
class ConversionStats:
    """Counts gathered while converting a dump."""

    pages: int = 0
    articles: int = 0
    sentences: int = 0
    redirects: int = 0
    other_namespaces: int = 0
    too_short: int = 0
    seconds: float = 0.0

    def summary(self):
        """A one-paragraph human-readable summary."""
        return (
            f"pages read: {self.pages}, articles written: {self.articles}, "
            f"sentences: {self.sentences} (skipped: {self.redirects} redirects, "
            f"{self.other_namespaces} non-article pages, {self.too_short} articles "
            f"without enough text) in {self.seconds:.1f} s"
        )


def open_dump(path):
    """Opens a dump for binary reading: `.bz2` and `.gz` are decompressed on the fly."""
    if not storage.isfile(path):
        raise FileNotFoundError(f"Wikipedia dump {path!r} does not exist or is not a file.")
    # A local path is opened by the decompressor itself (which then also closes it).
    source = storage.open(path, "rb") if storage.has_scheme(path) else path
    if path.endswith(".bz2"):
        return bz2.open(source, "rb")
    if path.endswith(".gz"):
        return gzip.open(source, "rb")
    return storage.open(path, "rb")


def iter_pages(path):
    """Yields every `Page` of a MediaWiki XML dump, streaming.

    Args:
      path: a pages-articles dump (`.xml`, `.xml.bz2` or `.xml.gz`).

    Raises:
      FileNotFoundError: the dump does not exist.
      ValueError: the file is not well-formed XML or not a MediaWiki export
        (the message names the file).
    """
    with open_dump(path) as stream:
        root = None
        try:
            for event, element in ElementTree.iterparse(stream, events=("start", "end")):
                if root is None:
                    root = element
                    if _local_name(root.tag) != "mediawiki":
                        raise ValueError(
                            f"{path!r} is not a MediaWiki XML export: its root element is "
                            f"<{_local_name(root.tag)}>, expected <mediawiki>."
                        )
                    continue
                if event == "end" and _local_name(element.tag) == "page":
                    yield _page_from_element(element)
                    # Parsed pages stay attached to the root; clearing it is
                    # what keeps memory bounded on multi-gigabyte dumps.
                    root.clear()
        except ElementTree.ParseError as error:
            raise ValueError(f"{path!r} is not well-formed XML: {error}") from error
        except (OSError, EOFError) as error:
            raise ValueError(f"Could not read the dump {path!r}: {error}") from error


def article_sentences(wikitext):
    """The sentences of an article's wikitext, cleaned, in order."""
    sentences = []
    for paragraph in wikitext_to_paragraphs(wikitext):
        sentences.extend(split_sentences(paragraph))
    return sentences


def convert_dump(
    input_path,
    output_path,
    min_chars=0,
    processes=1,
    titles_path=None,
    log_every=0,
    log=None,
):
    """Writes the articles of a dump as a BERT pretraining corpus.

    Args:
      input_path: the pages-articles dump (`.xml.bz2`, `.xml.gz` or `.xml`).
      output_path: the text file to write (one sentence per line, a blank
        line between articles).
      min_chars: articles whose cleaned text has fewer characters are skipped;
        articles with no text left are always skipped.
      processes: worker processes that clean pages (1: clean in this process).
      titles_path: if given, the title of each written article, one per line,
        in the same order as the documents of `output_path`.
      log_every: call `log` with a progress line every this many pages (0: never).
      log: a function taking a string; defaults to printing to stderr.

    Returns:
      A `ConversionStats`.
    """
    if processes < 1:
        raise ValueError(f"processes must be at least 1, got {processes}.")
    if min_chars < 0:
        raise ValueError(f"min_chars must be non-negative, got {min_chars}.")
    if not storage.isfile(input_path):
        # Checked before the output is created, so a typo leaves no empty file.
        raise FileNotFoundError(f"Wikipedia dump {input_path!r} does not exist or is not a file.")
    log = log or (lambda message: print(message, file=sys.stderr, flush=True))
    stats = ConversionStats()
    started = time.monotonic()
    pool = multiprocessing.Pool(processes) if processes > 1 else None
    titles_file = storage.open(titles_path, "w", encoding="utf-8") if titles_path else None
    try:
        with storage.open(output_path, "w", encoding="utf-8", newline="\n") as output:
            for title, sentences in _converted_articles(input_path, pool, processes, stats):
                if sum(len(s) for s in sentences) < max(min_chars, 1):
                    stats.too_short += 1
                    continue
                if stats.articles:
                    output.write("\n")
                output.write("\n".join(sentences))
                output.write("\n")
                if titles_file:
                    titles_file.write(title + "\n")
                stats.articles += 1
                stats.sentences += len(sentences)
                if log_every and stats.articles % log_every == 0:
                    log(f"... {stats.pages} pages, {stats.articles} articles")
    finally:
        if titles_file:
            titles_file.close()
        if pool:
            pool.close()
            pool.join()
    stats.seconds = time.monotonic() - started
    return stats


def _converted_articles(input_path, pool, processes, stats):
    """Yields (title, sentences) for every article, in dump order."""
    batch = []
    batch_size = _PAGES_PER_PROCESS_BATCH * processes
    for page in iter_pages(input_path):
        stats.pages += 1
        if page.namespace != ARTICLE_NAMESPACE:
            stats.other_namespaces += 1
        elif page.redirect:
            stats.redirects += 1
        else:
            batch.append((page.title, page.text))
            if len(batch) >= batch_size:
                yield from _convert_batch(batch, pool, processes)
                batch = []
    yield from _convert_batch(batch, pool, processes)


def _convert_batch(batch, pool, processes):
    if pool is None:
        return [_convert_page(item) for item in batch]
    # Small chunks balance the load: article sizes vary a hundredfold.
    return pool.map(_convert_page, batch, chunksize=max(1, len(batch) // (4 * processes)))


def _convert_page(title_and_text):
    title, text = title_and_text
    return title, article_sentences(text)


def _page_from_element(page):
    title = ""
    namespace = None
    redirect = False
    text = ""
    for child in page:
        name = _local_name(child.tag)
        if name == "title":
            title = child.text or ""
        elif name == "ns":
            namespace = int(child.text)
        elif name == "redirect":
            redirect = True
        elif name == "revision":
            for field in child:
                if _local_name(field.tag) == "text":
                    text = field.text or ""
    if namespace is None:
        # Exports older than MediaWiki 1.19 have no <ns>: take the page as an
        # article (a title prefix such as "Talk:" cannot be told from a colon
        # in an article title without the site's namespace list).
        namespace = ARTICLE_NAMESPACE
    # Some dumps mark redirects only in the text.
    redirect = redirect or text.lstrip()[:9].upper() == "#REDIRECT"
    return Page(title=title, namespace=namespace, redirect=redirect, text=text)


def _local_name(tag):
    """The tag name without its `{namespace}` (the export schema version varies)."""
    return tag.rsplit("}", 1)[-1]
