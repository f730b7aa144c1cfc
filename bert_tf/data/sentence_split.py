"""A small rule-based sentence splitter for English prose.

Rule: a sentence ends after `.`, `!` or `?` (possibly repeated and followed by
closing quotes or brackets) when whitespace follows and the next sentence
starts with an uppercase letter, a digit or an opening quote/bracket. A period
does not end a sentence after a known abbreviation ("Mr.", "Dr.", "e.g."), a
dotted initialism ("U.S.", "A.D."), a single capital initial ("J. R. R.
Tolkien") or, before a digit, a numbering word ("No. 5", "p. 14").

The trade-off is the usual one for such splitters: an initialism that really
ends a sentence ("... in the U.S. The ...") is not split. That costs a rare
overlong sentence, while splitting after every initialism would cut names
and citations into fragments.
"""

import os
import re

from bert_tf import storage

# Lower-cased, without the final period. Titles, ranks, Latin and citation
# abbreviations, months, company suffixes: words that are usually followed by
# more of the same sentence.
ABBREVIATIONS = frozenset(
    """
    mr mrs ms messrs dr prof sr jr st mt ft gen brig col lt maj sgt cpl capt cmdr adm
    gov sen rep pres supt rev hon fr sec atty
    vs v e.g i.e cf al viz approx ca c esp incl
    ed eds trans repr
    inc ltd co corp bros dept univ assn est
    jan feb mar apr jun jul aug sep sept oct nov dec
    ph.d m.d b.a m.a b.sc m.sc
    """.split()
)

# Words that abbreviate "number", "page", ... and so precede a numeral.
NUMBER_PREFIXES = frozenset("no nos vol vols p pp fig figs ch chap art sec op".split())

_BOUNDARY = re.compile(r"([.!?]+)[\"'”’»)\]]*\s+")
_INITIALISM = re.compile(r"^[A-Za-z](?:\.[A-Za-z])+$")
_OPENERS = "\"'“‘«(["


def split_sentences(text):
    """Splits a paragraph of prose into sentences.

    Args:
      text: one paragraph (newlines are treated as spaces).

    Returns:
      The sentences, stripped, in order, none empty.
    """
    text = " ".join(text.split())
    sentences = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        end = match.end()
        if end >= len(text):
            break
        if _is_sentence_end(text, match, text[end]):
            sentences.append(text[start:end].strip())
            start = end
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    return [s for s in sentences if s]


def _is_sentence_end(text, match, next_char):
    if not (next_char.isupper() or next_char.isdigit() or next_char in _OPENERS):
        return False
    terminator = match.group(1)
    if terminator != ".":
        # "!", "?" and ellipses are not used inside abbreviations.
        return True
    word = _word_before(text, match.start())
    if not word:
        return True
    lowered = word.lower()
    if lowered in ABBREVIATIONS:
        return False
    if next_char.isdigit() and lowered in NUMBER_PREFIXES:
        return False
    if len(word) == 1 and word.isalpha() and word.isupper():
        return False  # an initial, as in "J. R. R. Tolkien"
    if _INITIALISM.match(word):
        return False  # "U.S.", "e.g.", "A.D."
    return True


def _word_before(text, position):
    """The token ending at `position` (a period), without brackets or quotes."""
    start = text.rfind(" ", 0, position) + 1
    return text[start:position].lstrip(_OPENERS)


def write_sentence_per_line(source_files, output_dir):
    """Writes each source file (one document of prose) in BERT's corpus format.

    Returns the written paths; each holds one document, one sentence per line.
    """
    paths = []
    for source in source_files:
        with storage.open(source, encoding="utf-8") as f:
            sentences = split_sentences(f.read())
        if not sentences:
            continue
        path = os.path.join(output_dir, os.path.basename(source))
        with storage.open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(sentences) + "\n")
        paths.append(path)
    return paths
