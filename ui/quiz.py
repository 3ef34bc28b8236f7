"""Nine multiple-choice questions on the encoder, with feedback, a score and a link to the page that shows each answer.

The first eight topics follow the "Test Your Understanding" list of the seeds (seed 003); the ninth is issue 19's
[CLS]/[SEP] gap between raw attention and what flows. The wording is our own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Question:
    """One question; `answer` indexes `options`, `page` is the URL path of the page that demonstrates it."""

    id: str
    prompt: str
    options: tuple[str, ...]
    answer: int
    explanation: str
    page: str  # a path of ui/pages.PAGES
    demo: str  # one sentence: what to look at on that page
    settings: tuple[tuple[str, Any], ...] = ()  # settings the link sets before it opens the page (keys of SETTINGS)


QUESTIONS: tuple[Question, ...] = (
    Question(
        id="attention",
        prompt="Which kind of attention does every encoder layer use?",
        options=(
            "Self-attention with a causal mask, so a token sees only the tokens before it",
            "Self-attention without a causal mask: a token may attend to tokens on both sides of it",
            "Cross-attention from the encoder into a decoder's states",
            "None: the encoder is made of feed-forward layers only",
        ),
        answer=1,
        explanation="Queries, keys and values all come from the same sequence (self-attention), and no causal mask "
        "hides the later positions: in the 2017 encoder each token can draw on the whole input (a sliding-window layer, "
        "as in ModernBERT, limits it to its neighbours on both sides).",
        page="heatmaps",
        demo="Every row of the heatmap has weight to the right of the diagonal as well as to the left.",
    ),
    Question(
        id="layers",
        prompt="How many identical layers does the encoder of the original Transformer (2017) stack?",
        options=("1", "6", "12", "24"),
        answer=1,
        explanation="The base Transformer stacks N = 6 encoder layers; 12 and 24 are BERT-base and BERT-large.",
        page="diagram",
        demo="The default configuration builds 6 layers; the layer slider runs over all of them.",
    ),
    Question(
        id="ffn",
        prompt="To what width does the position-wise feed-forward network usually expand each token's vector?",
        options=("d_model / 4", "d_model", "4 × d_model", "d_model²"),
        answer=2,
        explanation="W1 maps d_model to d_ff and W2 maps back; the original uses d_model = 512 and d_ff = 2048, "
        "four times wider.",
        page="statistics",
        demo="The ffn_hidden tap is d_ff wide, four times the d_model width of the other taps.",
    ),
    Question(
        id="residual",
        prompt="What is the residual (skip) connection around each sub-layer for?",
        options=(
            "It removes parameters from the model",
            "It gives the signal and the gradients a direct path through the layer, so deep stacks stay trainable",
            "It adds the token positions to the embeddings",
            "It hides future tokens from attention",
        ),
        answer=1,
        explanation="The layer computes x + Sublayer(x): the identity path carries gradients straight back to "
        "earlier layers, which is what makes stacks of many layers trainable.",
        page="warmup",
        demo="The gradient norms at initialisation show how the placement of LayerNorm around the residual "
        "path changes the gradient each layer receives.",
    ),
    Question(
        id="encoder_only",
        prompt="Which of these models is built from a Transformer encoder alone?",
        options=("GPT-2", "T5", "BERT", "BART"),
        answer=2,
        explanation="BERT is an encoder-only stack; GPT-2 is decoder-only, and T5 and BART pair an encoder with "
        "a decoder.",
        page="wordpieces",
        demo="The tokenizer wraps every input in the model's special tokens: [CLS] … [SEP] for BERT's WordPiece, "
        "<s> … </s> for RoBERTa's byte-level BPE.",
    ),
    Question(
        id="output",
        prompt="What does the encoder produce?",
        options=(
            "A single vector for the whole input",
            "One contextual vector for every input position",
            "The attention weights and nothing else",
            "A score for every word of the vocabulary",
        ),
        answer=1,
        explanation="The output has the input's length: a d_model vector per token that now mixes in its context. "
        "A classifier may then pick one of them, such as the first token's ([CLS] in BERT, <s> in RoBERTa).",
        page="side-by-side",
        demo="Compare two sentences: the same word gets a different output vector in each context.",
    ),
    Question(
        id="layernorm",
        prompt="Where does the original Transformer apply LayerNorm in each sub-layer?",
        options=(
            "Before the sub-layer, inside the residual branch (Pre-LN)",
            "After the residual add, as LayerNorm(x + Sublayer(x)) (Post-LN)",
            "Only after the attention sub-layer",
            "Only after the feed-forward sub-layer",
        ),
        answer=1,
        explanation="The 2017 paper normalises the sum x + Sublayer(x) after both sub-layers (Post-LN). Many "
        "later models move it in front of the sub-layer (Pre-LN), which trains more stably.",
        page="diagram",
        demo="Step through a Post-LN layer: LayerNorm comes right after each residual add.",
    ),
    Question(
        id="bidirectional",
        prompt="What makes the encoder bidirectional?",
        options=(
            "It runs two separate stacks, one per reading direction",
            "No causal mask is applied, so each position attends to positions on both sides",
            "It contains a bidirectional RNN",
            "The input is also fed in reversed",
        ),
        answer=1,
        explanation="Nothing stops a token from looking to its right: with no causal mask, attention covers the "
        "left and the right context in one pass.",
        page="heatmaps",
        demo="Pick any token: its attention row has weight on tokens both before and after it.",
    ),
    Question(
        id="special_tokens",
        prompt="In the pretrained model many words put much of their attention weight on [CLS] and [SEP]. Does as much "
        "information flow from [CLS] and [SEP] into those words?",
        options=(
            "Yes: an attention weight is the share of information a word takes from each token",
            "No: their value vectors are short, so weighted by what they carry ([CLS]/[SEP] included) their share is "
            "several times smaller",
            "No: [CLS] and [SEP] are removed from the input before the attention",
            "Yes: [CLS] gathers the whole sentence, so every word reads it",
        ),
        answer=1,
        explanation="A weight α_ij only scales token j's value vector f(x_j) = v_j W_O. The values of [CLS] and [SEP] "
        "are short, so the value-weighted measure ‖α f(x)‖ (Kobayashi et al. 2020) puts several times less on them "
        "than the raw weights do: much of that attention is a parking place, not a source.",
        page="inside-a-head",
        demo="The lines are value-weighted, averaged over the heads of layer 2: switch the Measure back to raw "
        "attention and watch the lines to [CLS] and [SEP] return.",
        settings=(("measure", "value"), ("avg", True), ("layer", 2)),
    ),
)

BY_ID = {q.id: q for q in QUESTIONS}


def question(question_id: str) -> Question:
    """The question with this id; ValueError names the valid ids."""
    if question_id not in BY_ID:
        raise ValueError(f"Unknown question {question_id!r}; choose one of {', '.join(BY_ID)}.")
    return BY_ID[question_id]


def check(question_id: str, choice: int) -> tuple[bool, str]:
    """(correct, feedback) for one answer; the feedback always carries the explanation."""
    q = question(question_id)
    if isinstance(choice, bool) or not isinstance(choice, int) or not 0 <= choice < len(q.options):
        raise ValueError(f"choice={choice!r} must be an option index from 0 to {len(q.options) - 1}.")
    if choice == q.answer:
        return True, f"Correct. {q.explanation}"
    return False, f"Not quite: the answer is “{q.options[q.answer]}”. {q.explanation}"


def score(answers: dict[str, int | None]) -> int:
    """Number of correct answers in {question_id: choice}; unanswered (None) counts as wrong."""
    return sum(check(qid, choice)[0] for qid, choice in answers.items() if choice is not None)
