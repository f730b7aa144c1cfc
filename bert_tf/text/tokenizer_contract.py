"""The tokenizer contract: what a checkpoint's token ids mean.

A model is only valid with the vocabulary and casing it was trained with. Every
checkpoint this project writes records this contract, so loading it with a
different vocab can be refused with a clear message instead of silently
producing garbage.
"""

import filecmp
import hashlib

from bert_tf import storage

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


class TokenizerContractError(ValueError):
    """A vocabulary or casing does not match the one a checkpoint expects."""


def read_vocab(vocab_file):
    """The tokens of a BERT `vocab.txt`, one per line, in id order."""
    if not storage.isfile(vocab_file):
        raise FileNotFoundError(f"vocab file not found: {vocab_file}")
    with storage.open(vocab_file, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{vocab_file}: not valid UTF-8 at byte {e.start}") from e
    tokens = text.split("\n")
    if tokens and tokens[-1] == "":
        tokens.pop()
    tokens = [token.rstrip("\r") for token in tokens]
    if not tokens:
        raise ValueError(f"{vocab_file}: the vocabulary is empty")
    return tokens


def same_file_content(first: str, second: str) -> bool:
    """Whether two paths name the same bytes (equal paths, or two existing equal files).

    Args:
      first: a file path (may be empty).
      second: another.
    """
    if first == second:
        return True
    if not (first and second and storage.isfile(first) and storage.isfile(second)):
        return False
    return filecmp.cmp(first, second, shallow=False)


def contract_from_vocab(vocab_file, lower_case):
    """Builds the contract of `vocab_file` used with the given casing."""
    tokens = read_vocab(vocab_file)
    with storage.open(vocab_file, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    index = {token: i for i, token in enumerate(tokens)}
    missing = [token for token in SPECIAL_TOKENS if token not in index]
    if missing:
        raise ValueError(f"{vocab_file}: missing special token(s) {missing}")
    return {
        "vocab_sha256": digest,
        "vocab_size": len(tokens),
        "lower_case": bool(lower_case),
        "special_token_ids": {token: index[token] for token in SPECIAL_TOKENS},
    }


def guess_lower_case(vocab_file):
    """True when the vocab has no upper-case word pieces (an uncased vocab)."""
    for token in read_vocab(vocab_file):
        if token.startswith("[") and token.endswith("]"):
            continue
        if token != token.lower():
            return False
    return True


def check_contract(expected, vocab_file, lower_case, source="checkpoint"):
    """Raises `TokenizerContractError` unless the vocab/casing match `expected`."""
    actual = contract_from_vocab(vocab_file, lower_case)
    problems = []
    if actual["vocab_size"] != expected["vocab_size"]:
        problems.append(
            f"vocab size {actual['vocab_size']} != {expected['vocab_size']} expected")
    elif actual["vocab_sha256"] != expected["vocab_sha256"]:
        problems.append(
            f"vocab sha256 {actual['vocab_sha256'][:12]}... != "
            f"{expected['vocab_sha256'][:12]}... expected (same size, different tokens)")
    if actual["lower_case"] != expected["lower_case"]:
        problems.append(
            f"lower_case={actual['lower_case']} but the {source} was trained with "
            f"lower_case={expected['lower_case']}")
    if actual["special_token_ids"] != expected["special_token_ids"]:
        problems.append(
            f"special token ids {actual['special_token_ids']} != "
            f"{expected['special_token_ids']} expected")
    if problems:
        raise TokenizerContractError(
            f"vocab {vocab_file} does not match the tokenizer contract of {source}: "
            + "; ".join(problems))
