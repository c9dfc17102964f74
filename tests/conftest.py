"""Shared fixtures."""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")


@pytest.fixture
def small_pop():
    """A 10,000-item population with known truth (calibrated scores)."""
    import bayes_eval as be

    rng = np.random.default_rng(12345)
    scores = rng.random(10_000)
    truth = rng.random(10_000) < scores
    return be.Population(scores, threshold=0.5), truth
