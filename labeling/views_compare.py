"""Model-version comparison pages."""

urlpatterns: list = []
