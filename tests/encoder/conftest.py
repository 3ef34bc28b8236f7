"""Fixtures shared by the measure, attribution and faithfulness tests."""

import pytest

from encoder import load_pretrained, run

DEFAULT = "The animal didn't cross the street because it was too tired."  # the app's default sentence


@pytest.fixture(scope="session")
def pretrained():
    """The bundled all-MiniLM-L6-v2; tests read it and never change it."""
    return load_pretrained()


@pytest.fixture(scope="session")
def default_trace(pretrained):
    """The default sentence through the pretrained model."""
    return run(pretrained, DEFAULT)
