"""Cluster runs: one at a time, queued after commit, executed by a worker that beats its heartbeat;
a run whose worker stopped is failed by the next start."""

import logging
from dataclasses import asdict

import numpy as np
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from labeling import signals
from labeling.clustering.algorithm import (
    DIMENSIONS,
    ClusterParams,
    ClusterResult,
    cluster_vectors,
)
from labeling.clustering.reconcile import (
    reconcile_areas,
    reconcile_categories,
    write_model_assignments,
)
from labeling.clustering.services import (
    categories_refresh_sizes,
    clusterable_failures,
    vectors_for,
)
from labeling.clustering.vectors import unit_rows
from labeling.models import Assignment, ClusterRun

logger = logging.getLogger(__name__)


class RunAlreadyActive(Exception):
    def __init__(self, run: ClusterRun) -> None:
        super().__init__(f"cluster run {run.id} is still {run.status}")
        self.run = run


def cluster_runs_reset_stuck(*, now=None) -> int:
    """Fail runs whose worker stopped beating (or that no worker took), so a new run can start."""
    return ClusterRun.reset_stuck(
        ClusterRun.objects.all(), now=now or timezone.now(), stuck_seconds=settings.CLUSTER_RUN_STUCK_SECONDS
    )


def cluster_run_start(*, trigger: str, user=None, enqueue: bool = True) -> ClusterRun:
    """Create a queued run and queue it after commit; RunAlreadyActive if one is going.

    With ``enqueue=False`` the caller executes the run itself.
    """
    cluster_runs_reset_stuck()
    try:
        with transaction.atomic():
            run = ClusterRun.objects.create(trigger=trigger, started_by=user, params=asdict(cluster_params()))
    except IntegrityError:
        raise RunAlreadyActive(ClusterRun.objects.get(active=True)) from None
    if enqueue:
        transaction.on_commit(lambda: cluster_run_enqueue(run_id=run.id))
    return run


def cluster_run_enqueue(*, run_id: int) -> bool:
    """Hand the run to a worker; when the broker is unreachable the run fails at once with that reason."""
    from labeling.tasks import run_clustering  # tasks import services

    return ClusterRun.enqueue(run_clustering, run_id=run_id, then="start the run again later")


def cluster_params() -> ClusterParams:
    """The clustering parameters a new run uses: the defaults with the CLUSTER_* settings applied."""
    return ClusterParams(
        merge_threshold=settings.CLUSTER_MERGE_THRESHOLD,
        merge_min_items=settings.CLUSTER_MERGE_MIN_ITEMS,
        min_cluster_size=settings.CLUSTER_MIN_CLUSTER_SIZE,
    )


def cluster_run_execute(*, run_id: int) -> ClusterRun | None:
    """Cluster every failure signal and reconcile the result with the categories.

    Steps: claim the queued run (stop quietly if it is gone or taken); load
    the vectors; cluster; name the clusters; match them one-to-one to the
    existing categories so ids, reviewer names and statuses survive; write
    the model's assignments (never a reviewer's); record counts.
    """
    claimed = ClusterRun.objects.filter(id=run_id, status=ClusterRun.Status.QUEUED).update(
        status=ClusterRun.Status.RUNNING, started_at=timezone.now(), heartbeat_at=timezone.now()
    )
    if not claimed:
        return None
    run = ClusterRun.objects.get(id=run_id)
    try:
        _cluster_run_body(run)
    except Exception as exc:
        logger.exception("cluster run %s failed", run_id)
        run.update(
            status=ClusterRun.Status.FAILED,
            active=None,
            finished_at=timezone.now(),
            error=f"{type(exc).__name__}: {exc}"[:2000],
        )
        raise
    return run


def _cluster_run_body(run: ClusterRun) -> None:
    run.update(stage="loading vectors", progress=0.02)
    rows = list(clusterable_failures().order_by("id").values_list("id", "embedding_id", "embed_text"))
    item_ids = [row[0] for row in rows]
    vectors = unit_rows(vectors_for([row[1] for row in rows]))
    texts = [row[2] for row in rows]

    def progress(share: float) -> None:
        run.update(stage="clustering", progress=0.05 + 0.6 * share)

    params = ClusterParams(**run.params) if run.params else ClusterParams()
    if len(rows) >= params.min_items:
        result = cluster_vectors(vectors, params=params, progress=progress)
    else:
        result = ClusterResult(
            labels=np.full(len(rows), -1, dtype=np.int64),
            centroids=np.zeros((0, DIMENSIONS), dtype=np.float32),
            sizes=np.zeros(0, dtype=np.int64),
            similarity=np.zeros(len(rows), dtype=np.float32),
        )

    run.update(stage="naming categories", progress=0.7)
    previous = dict(
        Assignment.objects.filter(item_id__in=item_ids).values_list("item_id", "category_id")
    ) if item_ids else {}
    previous_area = dict(
        Assignment.objects.filter(item_id__in=item_ids).values_list("item_id", "area_id")
    ) if item_ids else {}

    run.update(stage="matching categories", progress=0.8)
    with transaction.atomic():
        plan = reconcile_categories(run, result, vectors, texts, item_ids, previous)
        run.update(stage="grouping areas", progress=0.85)
        area_of_item = reconcile_areas(run, result, vectors, texts, item_ids, plan, previous_area)
        run.update(stage="assigning items", progress=0.9)
        assigned = write_model_assignments(run, item_ids, plan, area_of_item)
        categories_refresh_sizes(run=run)

    labels = plan.labels
    run.update(
        status=ClusterRun.Status.DONE,
        active=None,
        stage="done",
        progress=1.0,
        finished_at=timezone.now(),
        counts={
            "items": len(rows),
            "clusters": int(result.n_clusters),
            "areas": int(result.n_areas),
            "matched": plan.matched,
            "new": plan.created,
            "assigned": assigned,
            "unassigned": len(rows) - assigned,
            "kept_by_stickiness": plan.kept,
        },
        quality={
            "mean_similarity": round(float(plan.similarity[labels >= 0].mean()), 4) if (labels >= 0).any() else None,
            "unassigned_share": round(float((labels < 0).mean()), 4) if len(labels) else None,
        },
    )
    signals.cluster_run_done.send(sender=ClusterRun, run_id=run.id)
