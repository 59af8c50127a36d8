"""Shared test settings.

Matplotlib draws with the file-only Agg backend (``npformer.viz`` leaves the
choice to its caller).

Hypothesis runs a bounded, derandomised profile by default so that the suite
is reproducible and stays well under three minutes on two cores (about 10 s). Set
``NPFORMER_HYPOTHESIS=thorough`` for many more, freshly random examples.
"""

import os

import matplotlib

matplotlib.use("Agg")  # figures go to files only; npformer.viz never chooses a backend itself

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

from npformer import backend

settings.register_profile(
    "ci",
    max_examples=100,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough",
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("NPFORMER_HYPOTHESIS", "ci"))


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture(autouse=True)
def numpy_backend_and_float32():
    """Every test starts on the backend chosen by NPFORMER_BACKEND (NumPy by default), float32."""
    name = os.environ.get("NPFORMER_BACKEND", "numpy") or "numpy"
    backend.set_backend(name)
    backend.set_default_dtype(np.float32)
    yield
    backend.set_backend(name)
    backend.set_default_dtype(np.float32)
