"""Category pages and cluster runs."""

urlpatterns: list = []
