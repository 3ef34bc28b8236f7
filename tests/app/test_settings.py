"""URL round trip of the explorer's settings: good links reopen the view, bad ones fall back with a reason."""

import pytest

from encoder import EncoderConfig
from ui import settings


def test_defaults_round_trip_to_an_empty_query():
    assert settings.to_query(settings.defaults()) == {}


def test_non_defaults_round_trip():
    values = settings.defaults() | {"model": "custom", "d_model": 256, "num_heads": 4, "norm": "pre",
                                    "dropout": 0.25, "train": True, "text": "a <b>b</b> & c", "layer": 3}
    query = settings.to_query(values)
    parsed, problems = settings.from_query(query)
    assert problems == []
    assert settings.defaults() | parsed == values


@pytest.mark.parametrize(
    ("key", "raw", "needle"),
    [
        ("d_model", "abc", "expected a number"),
        ("d_model", "100", "choose one of"),
        ("num_layers", "1e9", "choose a value from 1 to 24"),
        ("num_layers", "2.5", "whole number"),
        ("dropout", "nan", "finite"),
        ("dropout", "-1", "choose a value from 0 to 0.5"),
        ("norm", "middle", "choose one of post, pre"),
        ("train", "maybe", "true or false"),
        ("seed", "-5", "choose a value"),
    ],
)
def test_bad_values_fall_back_with_a_sentence(key, raw, needle):
    parsed, problems = settings.from_query({key: [raw]})
    assert key not in parsed
    assert len(problems) == 1 and key in problems[0] and needle in problems[0]
    assert "using" in problems[0]


def test_unknown_and_repeated_keys_are_reported():
    parsed, problems = settings.from_query({"bogus": ["1"], "num_layers": ["2", "3"]})
    assert parsed == {"num_layers": 3}
    assert any("bogus" in p for p in problems) and any("2 times" in p for p in problems)


def test_huge_sentence_is_cut():
    parsed, problems = settings.from_query({"text": ["x" * (settings.MAX_TEXT_CHARS + 10)]})
    assert len(parsed["text"]) == settings.MAX_TEXT_CHARS and problems


def test_config_from_values_and_impossible_combination():
    cfg = settings.config_from(settings.defaults() | {"d_model": 128, "num_heads": 4})
    assert cfg == EncoderConfig(d_model=128, num_heads=4)
    with pytest.raises(ValueError, match="not divisible"):
        settings.config_from(settings.defaults() | {"d_model": 64, "num_heads": 12})


def test_every_option_is_parseable_from_its_own_format():
    for setting in settings.SETTINGS.values():
        for option in setting.options or (setting.default,):
            assert setting.parse(setting.format(option)) == option


def test_text_is_capped_as_the_browser_counts_it():
    """The Sentence box counts UTF-16 units (an emoji is 2); a link must never hold more than the box accepts."""
    parsed, problems = settings.from_query({"text": ["🙂" * 3000]})
    assert parsed["text"] == "🙂" * (settings.MAX_TEXT_CHARS // 2) and problems
    assert settings.utf16_len(parsed["text"]) == settings.MAX_TEXT_CHARS
    assert settings.cut_utf16("a🙂b", 2) == "a"  # never half a character
    parsed, problems = settings.from_query({"text": ["é" * settings.MAX_TEXT_CHARS]})
    assert parsed["text"] == "é" * settings.MAX_TEXT_CHARS and not problems
