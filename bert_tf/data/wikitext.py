"""Turns MediaWiki markup (wikitext) into plain-text paragraphs.

This is not a MediaWiki renderer: templates are dropped rather than expanded,
so text produced by templates (infoboxes, unit conversions, dates) is lost.
What remains is the prose an editor typed, which is what a language-model
corpus wants. The passes, in order:

1. HTML entities are decoded (`&nbsp;` `&ndash;` `&amp;`), so escaped markup
   is handled like the literal markup it stands for.
2. Comments and tags whose content is not prose (`<ref>`, `<math>`,
   `<gallery>`, `<pre>`, ...) are removed with their content.
3. Templates `{{...}}` and tables `{| ... |}` are removed, nesting included.
4. External links `[http://x text]` become `text`; internal links
   `[[target|text]]` become `text` (or `target`); file, image, category and
   interlanguage links are removed, captions included.
5. Remaining HTML tags are removed (their content is kept), and so are
   behaviour switches (`__NOTOC__`), lines holding only bold text (labels of
   lists) and bold/italic quotes.
6. Line-level: headings, list items (`*`, `#`, `;`, `:`), table leftovers and
   horizontal rules are dropped, and so are whole sections that hold no prose
   (References, External links, See also, ...).
7. Consecutive lines are joined into paragraphs; whitespace and the spaces
   left in front of punctuation by removed markup are tidied.
"""

import html
import re

# Tags whose content is not running text: dropped with their content.
_DROPPED_CONTENT_TAGS = (
    "ref|references|math|chem|ce|gallery|timeline|imagemap|score|syntaxhighlight|"
    "source|pre|hiero|graph|mapframe|templatedata|includeonly|table|inputbox|"
    "categorytree|poem"
)
_PAIRED_TAG = re.compile(
    rf"<({_DROPPED_CONTENT_TAGS})\b[^<>]*?(?<!/)>.*?</\1\s*>", re.IGNORECASE | re.DOTALL
)
_SELF_CLOSING_TAG = re.compile(rf"<(?:{_DROPPED_CONTENT_TAGS})\b[^<>]*/>", re.IGNORECASE)
_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_LINE_BREAK_TAG = re.compile(r"<br\s*/?>", re.IGNORECASE)
# Any other opening, closing or self-closing HTML tag; the content stays.
_HTML_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9]*(?:\s[^<>]*)?/?>")
_TEMPLATE_TOKEN = re.compile(r"\{\{|\}\}")
_TABLE_TOKEN = re.compile(r"\{\||\|\}")
_EXTERNAL_LINK = re.compile(
    r"\[(?:(?:https?|ftps?|mailto|news|irc|gopher):|//)[^\s\]]*(?:\s+([^\]]*))?\]",
    re.IGNORECASE,
)
# The content may hold single brackets ("[above]", "Bicyclo[1.1.0]butane")
# but no "[[" or "]]": those belong to nested links, which are resolved first.
_INTERNAL_LINK = re.compile(r"\[\[((?:[^\[\]]|\[(?!\[)|\](?!\]))*)\]\]")
_BEHAVIOUR_SWITCH = re.compile(r"__[A-Z]+__")
_BOLD_ITALIC = re.compile(r"'{2,}")
# A line holding only bold text labels a list ("'''New York'''" above a list
# of delegates): a heading in all but name.
_BOLD_LINE = re.compile(r"^[ \t]*'{3,5}[^'\n]+'{3,5}[ \t]*:?[ \t]*$", re.MULTILINE)
_HEADING = re.compile(r"^(=+)\s*(.*?)\s*\1\s*$")
_INTERLANGUAGE_PREFIX = re.compile(r"^[a-z]{2,3}(?:-[a-z]{2,8})*$")
_SPACE_BEFORE_PUNCTUATION = re.compile(r"\s+([,.;:!?%)\]])")
_SPACE_AFTER_OPENING = re.compile(r"([(\[])\s+")
_EMPTY_BRACKETS = re.compile(r"\(\s*[,;:.]*\s*\)|\[\s*\]")
_LEFTOVER_MARKUP = re.compile(r"\{\{|\}\}|\[\[|\]\]|\{\||\|\}|''+|={2,}")

# Links to these namespaces render as media or page metadata, not as text.
_HIDDEN_LINK_NAMESPACES = frozenset({"file", "image", "category", "media"})

# Sections holding citations and lists of links rather than prose.
_DROPPED_SECTIONS = frozenset(
    {
        "references",
        "external links",
        "see also",
        "further reading",
        "notes",
        "footnotes",
        "notes and references",
        "references and notes",
        "citations",
        "sources",
        "bibliography",
        "works cited",
        "primary sources",
        "secondary sources",
    }
)


def wikitext_to_paragraphs(wikitext):
    """Converts the wikitext of an article into plain-text paragraphs.

    Args:
      wikitext: the page source, as found in a pages-articles dump (with the
        XML escaping already decoded).

    Returns:
      A list of non-empty paragraphs, each a single line of plain text.
    """
    text = _decode_entities(wikitext)
    text = _COMMENT.sub("", text)
    text = _SELF_CLOSING_TAG.sub("", text)
    text = _PAIRED_TAG.sub("", text)
    text = remove_nested(text, _TEMPLATE_TOKEN, "{{")
    text = remove_nested(text, _TABLE_TOKEN, "{|")
    text = _EXTERNAL_LINK.sub(lambda m: m.group(1) or "", text)
    text = replace_internal_links(text)
    text = _LINE_BREAK_TAG.sub(" ", text)
    text = _HTML_TAG.sub("", text)
    text = _BEHAVIOUR_SWITCH.sub("", text)
    text = _BOLD_LINE.sub("", text)
    text = _BOLD_ITALIC.sub("", text)
    return _paragraphs(_prose_lines(text))


def remove_nested(text, token_pattern, opener):
    """Removes balanced, possibly nested spans such as `{{...}}` or `{|...|}`.

    Args:
      text: the text to clean.
      token_pattern: a compiled regex matching the opening and the closing
        token (e.g. `\\{\\{|\\}\\}`).
      opener: the opening token as a string; any other match is a closer.

    Returns:
      The text without the spans. A closer without an opener is dropped; an
      opener that is never closed is dropped alone (MediaWiki shows it as
      text), and the text after it is cleaned on.
    """
    pieces = []
    depth = 0
    kept_from = 0
    outer_start = 0
    for match in token_pattern.finditer(text):
        if match.group(0) == opener:
            if depth == 0:
                pieces.append(text[kept_from : match.start()])
                outer_start = match.start()
            depth += 1
        elif depth == 0:
            pieces.append(text[kept_from : match.start()])  # stray closer
            kept_from = match.end()
        else:
            depth -= 1
            if depth == 0:
                kept_from = match.end()
    if depth > 0:
        rest = text[outer_start + len(opener) :]
        pieces.append(remove_nested(rest, token_pattern, opener))
    else:
        pieces.append(text[kept_from:])
    return "".join(pieces)


def replace_internal_links(text):
    """Replaces `[[...]]` links by their visible text, innermost first.

    Links nest only inside file/image captions; resolving the innermost ones
    first leaves the outer link free of brackets, so one simple pattern,
    applied until nothing changes, handles any depth.
    """
    while True:
        text, count = _INTERNAL_LINK.subn(_link_text, text)
        if count == 0:
            return text


def _link_text(match):
    parts = match.group(1).split("|")
    target = parts[0].strip()
    if target.startswith(":"):
        # [[:Category:X]] is an ordinary visible link to the category page.
        target = target[1:].strip()
    elif ":" in target:
        prefix = target.split(":", 1)[0].strip().lower()
        if prefix in _HIDDEN_LINK_NAMESPACES or _INTERLANGUAGE_PREFIX.match(prefix):
            return ""
    if len(parts) > 1:
        label = parts[-1].strip()
        if label:
            return label
        # The "pipe trick": [[Paris, Texas|]] shows "Paris".
        return re.sub(r"\s*\(.*?\)\s*$", "", target.split(",")[0]).strip()
    return target.lstrip("#")


def _decode_entities(text):
    # Dumps sometimes double-escape ("&amp;nbsp;"); two rounds cover that.
    text = html.unescape(html.unescape(text))
    return text.replace("\xa0", " ").replace("\u200b", "")


def _prose_lines(text):
    """Yields the lines that hold prose, with `None` at paragraph breaks."""
    dropped_level = None
    for raw_line in text.split("\n"):
        line = raw_line.strip()
        heading = _HEADING.match(line)
        if heading:
            level = len(heading.group(1))
            if dropped_level is not None and level > dropped_level:
                continue  # a sub-section of a dropped section
            title = _LEFTOVER_MARKUP.sub("", heading.group(2)).strip().lower()
            dropped_level = level if title in _DROPPED_SECTIONS else None
            yield None
            continue
        if dropped_level is not None:
            continue
        if not line or line[0] in "*#;:|!" or line.startswith("----"):
            yield None
            continue
        yield line


def _paragraphs(lines):
    paragraphs = []
    current = []
    for line in list(lines) + [None]:
        if line is not None:
            current.append(line)
            continue
        if current:
            paragraph = _tidy(" ".join(current))
            if paragraph:
                paragraphs.append(paragraph)
            current = []
    return paragraphs


def _tidy(text):
    # Whatever markup survived unbalanced is removed token by token, so no
    # brace, bracket or quote run reaches the corpus.
    text = _LEFTOVER_MARKUP.sub("", text)
    text = " ".join(text.split())
    text = _EMPTY_BRACKETS.sub("", text)
    text = _SPACE_AFTER_OPENING.sub(r"\1", text)
    text = _SPACE_BEFORE_PUNCTUATION.sub(r"\1", text)
    return " ".join(text.split())
