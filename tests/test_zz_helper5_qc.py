import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from labeling.models import Category
from tests.factories import user_make
pytestmark = pytest.mark.django_db
def test_count(client):
    client.force_login(user_make("rev", "reviewer"))
    for i in range(10):
        Category.objects.create(name=f"c{i}", size=i + 1)
    with CaptureQueriesContext(connection) as ctx:
        assert client.get("/").status_code == 200
    print("QUERIES", len(ctx.captured_queries))
    for q in ctx.captured_queries: print(q["sql"][:150])
