"""Review queue, item detail and labels, agreement."""

urlpatterns: list = []
