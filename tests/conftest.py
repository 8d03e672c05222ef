import pytest

from feedback import vector_index


@pytest.fixture(autouse=True)
def fresh_similarity_index():
    # The index lives for the whole process; each test has its own rows.
    vector_index.reset_shared_index()
    yield
