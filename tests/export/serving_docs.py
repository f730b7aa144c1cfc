"""Reads what docs/export-and-serving.md promises (signature tables, REST examples) and
what `saved_model_cli show --all` prints, as plain data the docs tests compare."""

import json
import os
import re

DOCS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                    "export-and-serving.md")

_NAME = re.compile(r"`([a-z_]+)`")
_SHAPE = re.compile(r"`\[([A-Z, ]+)\]`")
_GROUP = re.compile(r"\(([^()]*)\)")


def docs_text(path=DOCS):
    with open(path, encoding="utf-8") as f:
        return f.read()


def section(text, heading):
    """The text under `## heading` up to the next `## ` heading."""
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    if match is None:
        raise ValueError(f"docs: no section '## {heading}'")
    return match.group(1)


def tables(text):
    """Every markdown table of `text` as a list of rows (lists of cells), header first."""
    found, rows = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if not all(set(cell) <= {"-", ":"} for cell in cells):
                rows.append(cells)
        elif rows:
            found.append(rows)
            rows = []
    return found


def cell_tensors(cell):
    """(required, optional, shape overrides) named in a table cell.

    required and optional are {name: shape letters (["B", "C"]) or None}. A backticked
    name outside parentheses is required; the first name of a `(+ ...)` group is
    optional; a group "(`[B, C, S]` for multiple choice)" is a shape override
    ({"multiple choice": ["B", "C", "S"]}); other parenthesised words explain and are
    skipped. A backticked shape applies to every name since the previous shape.
    """
    optional, overrides = {}, {}
    for group in _GROUP.findall(cell):
        if group.startswith("+"):
            optional[_NAME.findall(group)[0]] = None
        elif match := re.fullmatch(rf"{_SHAPE.pattern} for (.+)", group):
            overrides[match.group(2)] = _letters(match.group(1))
    required, pending = {}, []
    for match in re.finditer(rf"{_NAME.pattern}|{_SHAPE.pattern}", _GROUP.sub(" ", cell)):
        if match.group(1):
            pending.append(match.group(1))
            required[match.group(1)] = None
        else:
            for name in pending:
                required[name] = _letters(match.group(2))
            pending = []
    return required, optional, overrides


def _letters(shape):
    return [letter.strip() for letter in shape.split(",")]


def kind_names(cell):
    """The task kinds a kind-table row names: "encoder / pretrainer" -> ["encoder",
    "pretrainer"]; "span labeler (SQuAD)" -> ["span_labeler"]."""
    return [name.strip().replace(" ", "_") for name in _GROUP.sub("", cell).split("/")]


def saved_model_cli_signatures(shown):
    """{signature: {"inputs"|"outputs": {key: {"dtype", "shape"}}}} of `show --all`'s text;
    dtype as printed (DT_STRING), shape a list (-1 unknown) or None for unknown rank."""
    signatures, current, part = {}, None, None
    for line in shown.splitlines():
        line = line.strip()
        if match := re.fullmatch(r"signature_def\['(.+)'\]:", line):
            current = signatures.setdefault(match.group(1), {"inputs": {}, "outputs": {}})
        elif match := re.fullmatch(r"(inputs|outputs)\['(.+)'\] tensor_info:", line):
            part = current[match.group(1)].setdefault(match.group(2), {})
        elif line.startswith("dtype: ") and part is not None:
            part["dtype"] = line.split(": ", 1)[1]
        elif line.startswith("shape: ") and part is not None:
            shape = line.split(": ", 1)[1]
            part["shape"] = None if shape == "unknown_rank" else [
                int(d) for d in shape.strip("()").split(",") if d.strip()]
    return signatures


def rest_examples(text):
    """[{"label", "request", "response"}] of every JSON body in the page's code blocks.

    A request is an object holding `instances` or `inputs`; its label is the model
    of its curl URL (`/v1/models/NAME:predict`) or the `# comment` after it. A
    response (`predictions`/`outputs`) belongs to the request before it.
    """
    decoder = json.JSONDecoder()
    examples = []
    for match in re.finditer(r"^ {4}(?:curl -d ')?(?=\{\")", text, re.M):
        body, end = decoder.raw_decode(text, match.end())
        line_end = text.find("\n", end)
        tail = text[end:line_end]
        if "predictions" in body or "outputs" in body:
            if not examples or examples[-1]["response"] is not None:
                raise ValueError(f"docs: a response with no request before it: {body}")
            examples[-1]["response"] = body
            continue
        if tail.startswith("'"):
            label = re.search(r"/v1/models/(\w+):predict", text[end:]).group(1)
        elif "#" in tail:
            label = tail.split("#", 1)[1].strip()
        else:
            raise ValueError(f"docs: a request with neither a URL nor a # label: {body}")
        examples.append({"label": label, "request": body, "response": None})
    return examples
