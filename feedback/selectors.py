"""Reads for the feedback app."""

from django.utils import timezone

from feedback.models import ApiToken, Source
from feedback.services import token_hash
from feedback.vector_index import Neighbour


class TokenRefused(Exception):
    """Why a bearer token was refused (a one-line message)."""


def source_for_webhook(*, slug: str) -> Source | None:
    """The active source a webhook URL names.

    Every delivery runs this first, so it is a raw query: the ORM spends
    several times longer building ``filter(...).first()`` than the database
    spends answering it.
    """
    query = f"SELECT * FROM {Source._meta.db_table} WHERE slug = %s AND is_active LIMIT 1"
    return next(iter(Source.objects.raw(query, [slug])), None)


def api_token_authenticate(*, raw_token: str) -> ApiToken:
    """The live token for a raw bearer value, or TokenRefused saying why not."""
    token = ApiToken.objects.select_related("source").filter(token_hash=token_hash(raw_token)).first()
    if token is None:
        raise TokenRefused("the API token is not valid")
    if token.revoked_at is not None:
        raise TokenRefused("the API token has been revoked")
    if token.expires_at is not None and token.expires_at <= timezone.now():
        raise TokenRefused("the API token has expired")
    if not token.source.is_active:
        raise TokenRefused("the API token's source is deactivated")
    return token


def similar_items(*, item_id: int | None = None, text: str | None = None, k: int = 10) -> list[Neighbour]:
    """The k items most similar to an item or to a text, best first."""
    from feedback.vector_index import shared_index

    index = shared_index()
    if item_id is not None:
        query = index.vector_of_item(item_id)
        if query is None:
            return []
        return index.search(query, k=k, exclude_item=item_id)
    if text is None or not text.strip():
        return []
    from feedback import embedder

    return index.search(embedder.embed_texts([text])[0], k=k)
