"""Factories for the export tests: items, vectors, labels, datasets (fixtures: conftest.py)."""

import uuid
from datetime import UTC, datetime

import numpy as np
from django.contrib.auth import get_user_model

from exports import datasets, runs
from exports.models import DatasetVersion, Mode, Trigger
from exports.schemas import DatasetIn
from feedback.models import Embedding, FeedbackItem, Source
from feedback.pipeline import content_hash
from feedback.text import embeddable_text
from labeling.models import Label

OCCURRED = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def source_get(slug: str = "product") -> Source:
    source = Source.objects.filter(slug=slug).first()
    return source or Source.objects.create(name=slug, slug=slug, signing_secret="whsec_dGVzdA==")


def unit(seed: int | np.ndarray, dims: int = 384) -> np.ndarray:
    vector = np.random.default_rng(seed).standard_normal(dims) if isinstance(seed, int) else np.asarray(seed, float)
    return (vector / np.linalg.norm(vector)).astype(np.float32)


def at_cosine(base: np.ndarray, cosine: float, seed: int = 99) -> np.ndarray:
    """A unit vector with exactly this cosine to `base`."""
    other = unit(seed)
    other = other - (other @ base) * base
    other /= np.linalg.norm(other)
    return unit(cosine * base + np.sqrt(1 - cosine**2) * other)


def item_make(
    *,
    comment: str = "It edited the wrong file.",
    vector: np.ndarray | None = None,
    source: Source | None = None,
    request: str = "Rename foo to bar in utils.py",
    output: str | None = "I renamed foo in main.py.",
    **fields,
) -> FeedbackItem:
    """A thumbs-down with a conversation; with `vector` it is embedded as the pipeline would have."""
    context = fields.pop("context", None)
    if context is None:
        context = {"messages": [{"role": "user", "content": request}]}
        if output is not None:
            context["output"] = output
        context["tool_calls"] = [{"name": "edit_file", "arguments": {"path": "main.py"}}]
    defaults = {
        "source": source or source_get(),
        "external_id": f"evt_{uuid.uuid4().hex[:12]}",
        "kind": FeedbackItem.Kind.RATING,
        "rating": -1,
        "comment": comment,
        "context": context,
        "model_name": "coder",
        "model_version": "2.1",
        "variant": "A",
        "surface": "ide",
        "occurred_at": OCCURRED,
        "receipt_id": uuid.uuid4(),
    }
    defaults.update(fields)
    item = FeedbackItem.objects.create(**defaults)
    if vector is not None:
        embed_plant(item, vector)
    return item


def embed_plant(item: FeedbackItem, vector: np.ndarray) -> None:
    text = embeddable_text(item)
    embedding = Embedding.objects.create(
        content_hash=content_hash(text + uuid.uuid4().hex), model_name="test", vector=unit(vector).tobytes()
    )
    FeedbackItem.objects.filter(id=item.id).update(
        embed_text=text, embedding=embedding, status=FeedbackItem.Status.EMBEDDED
    )
    item.refresh_from_db()


def label_make(item: FeedbackItem, reviewer=None, **fields) -> Label:
    reviewer = reviewer or get_user_model().objects.get_or_create(username="labeller")[0]
    defaults = {"verdict": Label.Verdict.FAILURE}
    defaults.update(fields)
    return Label.objects.create(item=item, reviewer=reviewer, **defaults)


def dataset_make(name: str = "train-set", purpose: str = "train", formats=("csv",), **spec):
    return datasets.dataset_create(
        spec=DatasetIn.model_validate({"name": name, "purpose": purpose, "formats": list(formats), **spec})
    )


def export(
    dataset, *, mode: str = Mode.SNAPSHOT, trigger: str = Trigger.COMMAND, force: bool = False
) -> DatasetVersion:
    """The version the export made, or with unchanged data (and no `force`) the one it matched."""
    run = runs.export_run_start(dataset=dataset, trigger=trigger, mode=mode, force=force, enqueue=False)
    version = runs.export_run_execute(run_id=run.id)
    assert version is not None
    return version


def member_ids(version: DatasetVersion) -> set[int]:
    return set(version.members.values_list("item_id", flat=True))
