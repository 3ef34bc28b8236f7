"""The measures ranked over a set of sentences (encoder/analysis/ranking.py): the table is the mean and spread of each
case's deletion AOPC as faithfulness() computes it, and the published ordering is judged by hand-made numbers."""

import math

import pandas as pd
import pytest
import torch

from encoder import EncoderConfig, build_model, run
from encoder.analysis import faithfulness
from encoder.analysis.attribution import similarity_target, token_target
from encoder.analysis.ranking import PUBLISHED, Case, published_order, rank_measures, summarise

SMALL = EncoderConfig(d_model=32, num_heads=4, d_ff=64, num_layers=2)
CASES = [Case("The cat sat on the mat.", similarity_target("A kitten was sleeping on the rug.")),
         Case("Stocks rallied after the report.", token_target(2))]


@pytest.fixture(scope="module")
def small():
    return build_model(SMALL)


def test_the_table_aggregates_what_faithfulness_computes_case_by_case(small):
    ranking = rank_measures(small, CASES)
    for n, case in enumerate(CASES, 1):
        chart, _ = faithfulness.faithfulness(small, run(small, case.text), case.target)
        rows = ranking.cases[ranking.cases["case"] == n].set_index("key")
        for curve in chart.curves:
            assert rows.loc[curve.key, "aopc_deletion"] == pytest.approx(curve.aopc_deletion, abs=1e-9)
            assert rows.loc[curve.key, "aopc_insertion"] == pytest.approx(curve.aopc_insertion, abs=1e-9)
    table = ranking.table.set_index("key")
    for key, group in ranking.cases.groupby("key"):
        values = group["aopc_deletion"].tolist()
        assert table.loc[key, "n"] == len(values)  # 2, or 1 for flow: computed for the token target only
        assert table.loc[key, "mean_aopc"] == pytest.approx(sum(values) / len(values))
        want = abs(values[0] - values[1]) / math.sqrt(2) if len(values) == 2 else 0.0
        assert table.loc[key, "std_aopc"] == pytest.approx(want)
    assert list(ranking.table["mean_aopc"]) == sorted(ranking.table["mean_aopc"], reverse=True)
    assert "flow" in ranking.skipped  # mean pooling reads every token: flow is for one (the token target has it)
    assert table.loc["flow", "n"] == 1
    assert ranking.seconds > 0


def test_knock_outs_reach_every_case(small):
    intact = rank_measures(small, CASES[:1])
    knocked = rank_measures(small, CASES[:1], ablate={(0, "attn")})
    chart, _ = faithfulness.faithfulness(small, run(small, CASES[0].text, ablate={(0, "attn")}), CASES[0].target)
    rows = knocked.cases.set_index("key")
    assert rows.loc["random", "aopc_deletion"] == pytest.approx(chart.curves[-1].aopc_deletion, abs=1e-9)
    assert not intact.cases["aopc_deletion"].equals(knocked.cases["aopc_deletion"])


def test_an_empty_set_and_a_refused_case_say_so(small):
    with pytest.raises(ValueError, match="no sentences"):
        rank_measures(small, [])
    with pytest.raises(ValueError, match="special tokens"):
        rank_measures(small, [Case("[SEP]", token_target(0))])


def per_case(means: dict[str, list[float]]) -> pd.DataFrame:
    rows = [dict(case=n + 1, key=key, measure=key.upper(), aopc_deletion=v, aopc_insertion=0.0)
            for key, values in means.items() for n, v in enumerate(values)]
    return pd.DataFrame(rows)


def test_beats_random_counts_the_cases_a_ranking_beat_the_random_order():
    table = summarise(per_case({"ig": [0.5, 0.1, 0.4], "random": [0.2, 0.2, 0.2]})).set_index("key")
    assert table.loc["ig", "beats_random"] == "2 of 3" and table.loc["random", "beats_random"] == "—"
    assert table.loc["ig", "min_aopc"] == 0.1 and table.loc["ig", "max_aopc"] == 0.5


def test_the_published_ordering_holds_breaks_or_cannot_be_checked():
    clear = {"decompx": [0.60, 0.62], "alti_rollout": [0.40, 0.42], "ig": [0.30, 0.32], "gxi": [0.20, 0.22],
             "random": [0.1, 0.1]}
    order = published_order(summarise(per_case(clear)))
    assert order.holds is True and order.clear
    assert "holds" in order.text and "decompx 0.610 > alti_rollout 0.410 > ig 0.310 > gxi 0.210" in order.text
    swapped = clear | {"ig": [0.45, 0.47]}
    order = published_order(summarise(per_case(swapped)), lambda k: k.upper())
    assert order.holds is False and "ALTI_ROLLOUT (0.410) is not above IG (0.460)" in order.text
    noisy = clear | {"ig": [0.0, 0.78]}  # the right mean, but a spread that swallows both steps next to it
    order = published_order(summarise(per_case(noisy)))
    assert order.holds is True and not order.clear and "within the spread" in order.text
    missing = {k: v for k, v in clear.items() if k != "decompx"}
    order = published_order(summarise(per_case(missing)), skipped={"decompx": "DecompX refuses Pre-LN."})
    assert order.holds is None and "DecompX refuses Pre-LN." in order.text
    assert PUBLISHED == ("decompx", "alti_rollout", "ig", "gxi")


def test_it_runs_on_the_pretrained_model_with_every_published_ranking(pretrained):
    ranking = rank_measures(pretrained, [Case("A man is playing guitar.", similarity_target("Someone plays music."))])
    assert set(PUBLISHED) <= set(ranking.table["key"])
    assert torch.isfinite(torch.tensor(ranking.table["mean_aopc"].to_numpy())).all()
