"""Dataset pages."""

urlpatterns: list = []
