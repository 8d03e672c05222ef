"""Labeling API: /api/v1/compare."""

from ninja import Router

router = Router(tags=["compare"])
