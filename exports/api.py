"""Dataset API: /api/v1/datasets."""

from ninja import Router

router = Router(tags=["datasets"])
