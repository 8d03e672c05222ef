import pytest

from feedback import custom_patterns, vector_index


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
