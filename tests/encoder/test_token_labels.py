"""Tokens as people read them (Trace.labels) and the model's own special tokens (Trace.special_tokens, positions), for
the three kinds of tokenizer the families use; the token list the model reads never changes."""

from __future__ import annotations

from pathlib import Path

import pytest

import encoder
from encoder.analysis.variants import find_token
from encoder.tokenizer import SPACE_MARK, readable, tokenizer, tokenizer_kind
from tests import checkpoints

TEXT = "The animal didn't cross 🍕 café\nnow"


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    """A tokenizer.json of each kind: byte-level BPE (RoBERTa), Unigram (XLM-RoBERTa), WordPiece (BERT)."""
    out = {}
    for family in ("roberta", "xlm-roberta", "bert"):
        folder = tmp_path_factory.mktemp(family)
        checkpoints.save_tokenizer(checkpoints.tokenizer_for(family), checkpoints.RECIPES[family].specials, folder)
        out[family] = folder
    return out


def test_the_kind_of_tokenizer_is_read_from_its_file(folders):
    assert tokenizer_kind(512, folders["roberta"]) == "byte-level BPE"
    assert tokenizer_kind(512, folders["xlm-roberta"]) == "Unigram"
    assert tokenizer_kind(512, folders["bert"]) == tokenizer_kind(512) == "WordPiece"


def test_byte_level_tokens_read_as_text_one_label_per_token(folders):
    enc = tokenizer(512, folders["roberta"]).encode(TEXT)
    labels = readable(enc.tokens, 512, folders["roberta"])
    assert len(labels) == len(enc.tokens)
    assert any(t.startswith("Ġ") for t in enc.tokens) and not any("Ġ" in t for t in labels)
    assert labels[0] == "<s>" and labels[-1] == "</s>"  # added tokens are kept as written
    assert f"{SPACE_MARK}an" in labels and "é" in "".join(labels) and "Ã" not in "".join(labels)
    # the pizza is four bytes: pieces of it that are no whole character show as SentencePiece spells a byte
    pizza = "".join(labels[enc.tokens.index("ð"):enc.tokens.index("ð") + 4])
    assert pizza == "<0xF0><0x9F><0x8D><0x95>"
    assert "\n" in "".join(labels)  # "Ċ" is the newline byte: figures then show it as a control picture
    # read back, the labels are the text (spaces as the mark, bytes as they came)
    joined = "".join(labels[1:-1]).replace(SPACE_MARK, " ")
    assert joined.replace("<0xF0><0x9F><0x8D><0x95>", "🍕") == TEXT


def test_other_tokenizers_keep_their_tokens(folders):
    for family in ("xlm-roberta", "bert"):
        enc = tokenizer(512, folders[family]).encode(TEXT)
        assert readable(enc.tokens, 512, folders[family]) == enc.tokens


@pytest.fixture(scope="module")
def roberta(tmp_path_factory) -> encoder.Encoder:
    return encoder.load_pretrained(checkpoints.build("roberta", tmp_path_factory.mktemp("tiny") / "tiny-roberta"))


def test_a_roberta_trace_carries_its_specials_and_labels_and_reads_its_own_tokens(roberta):
    trace = encoder.run(roberta, "The animal didn't cross the street because it was too tired.")
    assert trace.special_tokens == ("<s>", "</s>") and trace.special_positions == (0, trace.seq_len - 1)
    assert trace.tokens[1] == "The" and trace.tokens[2].startswith("Ġ")
    assert trace.labels[2] == SPACE_MARK + trace.tokens[2][1:] and len(trace.labels) == trace.seq_len
    assert find_token(trace.labels, "it") == trace.labels.index(f"{SPACE_MARK}it")  # a typed word finds "▁it"
    ids = tokenizer(roberta.cfg.max_len, roberta.vocab_dir).encode(trace.text).ids
    assert trace.token_ids == ids  # the model read the tokenizer's ids; the labels are for the eye only


def test_a_bert_trace_keeps_its_tokens_as_labels():
    trace = encoder.run(encoder.load_pretrained(), "Tokenization splits words.")
    assert trace.labels == trace.tokens and trace.special_tokens == ("[CLS]", "[SEP]")
    assert trace.special_positions == (0, trace.seq_len - 1)
    typed = encoder.run(encoder.load_pretrained(), "a [SEP] b")
    assert typed.special_positions == (0, 2, 4)  # a special token the text itself holds counts too
