"""Tiny random checkpoints of every family we load, built at test time with transformers and tokenizers.

Nothing is downloaded: each builder trains a small tokenizer (WordPiece, byte-level BPE or Unigram, as the real
family uses) on SENTENCES, initialises a small model with transformers, perturbs every weight (LayerNorm gains
and biases included, so nothing is trivially 1 or 0) and saves both with save_pretrained, as a user's folder
would look. The library tests compare our loader with transformers on these folders; the app's browser tests can
build one into ENCODER_EXPLORER_MODELS with `build("roberta", models_dir / "tiny-roberta")`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # transformers must never reach for the network here
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers  # noqa: E402
from transformers import PreTrainedTokenizerFast  # noqa: E402

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "The animal didn't cross the street because it was too tired.",
    "Attention decides which words matter, and every token reads every other token at once.",
    "An encoder turns a sentence into one vector per token; a decoder writes one token at a time.",
    "Rotary positions turn queries and keys, so their dot product depends on the distance alone.",
    "A sliding window lets each token see only its neighbours, which is cheaper for long texts.",
    "Crème brûlée à São Paulo, naïve café, Ångström; 東京は日本の首都です。 I love pizza 🍕!",
    "Wait... what?! (Yes) -- it's 100% true; isn't it? #hashtag @user e-mail: a.b@c.org",
]
# Longer than the windows the ModernBERT builders use (local_attention 8 or 16), so the window matters.
LONG = " ".join(SENTENCES[:4])


@dataclass(frozen=True)
class Specials:
    """A tokenizer's special tokens in id order, and the two its post-processor puts around a sentence."""

    tokens: tuple[str, ...]
    cls: str
    sep: str


BERT_SPECIALS = Specials(("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"), "[CLS]", "[SEP]")
ROBERTA_SPECIALS = Specials(("<s>", "<pad>", "</s>", "<unk>", "<mask>"), "<s>", "</s>")


def wordpiece(specials: Specials = BERT_SPECIALS, vocab_size: int = 400) -> Tokenizer:
    """An uncased BERT WordPiece tokenizer trained on SENTENCES: [CLS] $A [SEP]."""
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.train_from_iterator(SENTENCES, trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=list(specials.tokens)))
    return _framed(tok, specials)


def byte_bpe(specials: Specials = ROBERTA_SPECIALS, vocab_size: int = 400) -> Tokenizer:
    """A byte-level BPE tokenizer as RoBERTa's (and ModernBERT's) trained on SENTENCES: every byte has a token."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(SENTENCES, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(specials.tokens),
                                                           initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return _framed(tok, specials)


def unigram(specials: Specials = ROBERTA_SPECIALS, vocab_size: int = 200) -> Tokenizer:
    """A SentencePiece-style Unigram tokenizer as XLM-RoBERTa's (and ALBERT's) trained on SENTENCES."""
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.train_from_iterator(SENTENCES, trainers.UnigramTrainer(vocab_size=vocab_size, unk_token=specials.tokens[
        [t.strip("<>[]").lower() for t in specials.tokens].index("unk")], special_tokens=list(specials.tokens)))
    return _framed(tok, specials)


def _framed(tok: Tokenizer, specials: Specials) -> Tokenizer:
    cls, sep = (specials.cls, tok.token_to_id(specials.cls)), (specials.sep, tok.token_to_id(specials.sep))
    tok.post_processor = processors.TemplateProcessing(
        single=f"{cls[0]} $A {sep[0]}", pair=f"{cls[0]} $A {sep[0]} $B:1 {sep[0]}:1", special_tokens=[cls, sep])
    return tok


def save_tokenizer(tok: Tokenizer, specials: Specials, folder: Path) -> None:
    """tokenizer.json and tokenizer_config.json, saved the way transformers saves a fast tokenizer."""
    names = dict(zip(("pad_token", "unk_token", "mask_token"),
                     (next(t for t in specials.tokens if kind in t.lower()) for kind in ("pad", "unk", "mask")),
                     strict=True))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, cls_token=specials.cls, sep_token=specials.sep,
                                   bos_token=specials.cls, eos_token=specials.sep, **names)
    fast.save_pretrained(str(folder))


@dataclass(frozen=True)
class Recipe:
    """How to build one family's tiny checkpoint: config and model classes, sizes, tokenizer."""

    config: str  # transformers class names
    model: str
    task_model: str  # a task model on the same encoder (its tensors carry a prefix and a head)
    tokenizer: str  # "wordpiece", "bpe" or "unigram"
    specials: Specials
    sizes: dict[str, Any]


_BERT_SIZES = dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=48,
                   max_position_embeddings=128)
RECIPES: dict[str, Recipe] = {
    "bert": Recipe("BertConfig", "BertModel", "BertForMaskedLM", "wordpiece", BERT_SPECIALS, _BERT_SIZES),
    "roberta": Recipe("RobertaConfig", "RobertaModel", "RobertaForMaskedLM", "bpe", ROBERTA_SPECIALS,
                      dict(_BERT_SIZES, max_position_embeddings=130, type_vocab_size=1, pad_token_id=1)),
    "xlm-roberta": Recipe("XLMRobertaConfig", "XLMRobertaModel", "XLMRobertaForMaskedLM", "unigram", ROBERTA_SPECIALS,
                          dict(_BERT_SIZES, max_position_embeddings=130, type_vocab_size=1, pad_token_id=1)),
    "distilbert": Recipe("DistilBertConfig", "DistilBertModel", "DistilBertForMaskedLM", "wordpiece", BERT_SPECIALS,
                         dict(dim=32, n_layers=3, n_heads=4, hidden_dim=48, max_position_embeddings=128)),
    "electra": Recipe("ElectraConfig", "ElectraModel", "ElectraForPreTraining", "wordpiece", BERT_SPECIALS,
                      dict(_BERT_SIZES, embedding_size=16)),
    "albert": Recipe("AlbertConfig", "AlbertModel", "AlbertForMaskedLM", "unigram", BERT_SPECIALS,
                     dict(_BERT_SIZES, embedding_size=16, hidden_act="gelu_new")),
    "modernbert": Recipe("ModernBertConfig", "ModernBertModel", "ModernBertForMaskedLM", "bpe", BERT_SPECIALS,
                         dict(hidden_size=32, num_hidden_layers=4, num_attention_heads=4, intermediate_size=40,
                              max_position_embeddings=256, local_attention=16, global_attn_every_n_layers=3)),
}
_TOKENIZERS = {"wordpiece": wordpiece, "bpe": byte_bpe, "unigram": unigram}


def tokenizer_for(family: str) -> Tokenizer:
    """The trained tokenizer a family's tiny checkpoint uses."""
    recipe = RECIPES[family]
    return _TOKENIZERS[recipe.tokenizer](recipe.specials)


@torch.no_grad()
def perturb(model: torch.nn.Module, seed: int = 1, scale: float = 0.1, skip: tuple[str, ...] = ()) -> torch.nn.Module:
    """Add N(0, scale^2) noise to every parameter (LayerNorm gains and biases too), except names containing `skip`."""
    gen = torch.Generator().manual_seed(seed)
    for name, p in model.named_parameters():
        if not any(s in name for s in skip):
            p.add_(scale * torch.randn(p.shape, generator=gen))
    return model


def build(family: str, folder: Path, *, task: bool = False, perturb_skip: tuple[str, ...] = (), **changes: Any) -> Path:
    """Save a tiny random `family` checkpoint (task=True: its masked-LM/pre-training model) with a tokenizer.json.

    `changes` override config values; the model is initialised from seed 0 without moving the global RNG.
    Returns `folder`.
    """
    recipe = RECIPES[family]
    tok = tokenizer_for(family)
    specials = {f"{k}_token_id": tok.token_to_id(t) for k, t in (("cls", recipe.specials.cls), ("sep", recipe.specials.sep))}
    pad = tok.token_to_id(next(t for t in recipe.specials.tokens if "pad" in t.lower()))
    ids = dict(pad_token_id=pad, bos_token_id=specials["cls_token_id"], eos_token_id=specials["sep_token_id"])
    if family == "modernbert":
        ids |= specials
    config = getattr(transformers, recipe.config)(vocab_size=tok.get_vocab_size(), **{**ids, **recipe.sizes, **changes})
    with torch.random.fork_rng():  # transformers initialises from the global RNG; leave it as it was
        torch.manual_seed(0)
        model = getattr(transformers, recipe.task_model if task else recipe.model)(config).eval()
    perturb(model, skip=perturb_skip)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(folder))
    save_tokenizer(tok, recipe.specials, folder)
    return folder


def reference(family: str, folder: Path) -> torch.nn.Module:
    """transformers' own base model on the folder, with the eager attention that returns the weights."""
    return getattr(transformers, RECIPES[family].model).from_pretrained(str(folder), attn_implementation="eager").eval()
