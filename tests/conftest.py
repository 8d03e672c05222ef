import numpy as np
import pytest

from feedback import custom_patterns, vector_index
from tests.factories import client_for, user_make
from tests.factories.clustering import THEMES
from tests.factories.rollouts import planted_rise


# Logged-in browsers of each role, for the page tests. A module that needs other
# people (a reviewer as a user object, a second reviewer) defines its own fixture
# of the same name, which takes precedence there.
@pytest.fixture
def reviewer():
    return client_for(user_make("rita", "reviewer"))


@pytest.fixture
def admin():
    return client_for(user_make("ada", "admin"))


@pytest.fixture
def nobody():
    """Logged in, but with no role: staff who only file reports."""
    return client_for(user_make("sam"))


@pytest.fixture(autouse=True)
def fresh_similarity_index():
    # The index lives for the whole process; each test has its own rows.
    vector_index.reset_shared_index()
    yield


@pytest.fixture(autouse=True)
def fresh_custom_patterns():
    # Kept for seconds per process; a rolled-back test's sources must not linger.
    custom_patterns.forget()
    yield
    custom_patterns.forget()


# Shared by the import tests: uploads are kept under DATA_DIR.
@pytest.fixture
def data_dir(settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"
    return settings.DATA_DIR


# Shared by the export tests.
@pytest.fixture
def export_root(settings, tmp_path):
    settings.EXPORT_ROOT = tmp_path / "exports"
    return settings.EXPORT_ROOT


@pytest.fixture
def no_broker(monkeypatch):
    """Run ids handed to the worker (no broker in these tests)."""
    queued = []
    monkeypatch.setattr("exports.tasks.export_run.apply_async", lambda args, **kwargs: queued.append(args[0]))
    return queued


# Shared by the cluster-run tests (tests/factories/clustering.py).
@pytest.fixture
def centers():
    rng = np.random.default_rng(0)
    raw = rng.standard_normal((len(THEMES), 384))
    return raw / np.linalg.norm(raw, axis=1, keepdims=True)


# Shared by the rollout comparison tests (tests/factories/rollouts.py).
@pytest.fixture
def planted_rollouts():
    return planted_rise()
