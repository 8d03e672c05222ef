"""Agreement between reviewers (Cohen's kappa on verdicts, per category) and the disputes it leaves:
which label is the truth until someone settles it."""

from collections.abc import Sequence
from dataclasses import dataclass

from django.db.models import (
    Count,
)
from sklearn.metrics import cohen_kappa_score

from core.roles import is_admin
from feedback.models import FeedbackItem
from labeling.models import (
    Category,
    DoubleReview,
    Label,
    Settlement,
)
from labeling.review.selectors import item_assignment, item_snippet


@dataclass
class Pair:
    item: FeedbackItem
    first: Label
    second: Label
    category: Category | None

    @property
    def preview(self) -> str:
        """The item's title or comment, scrubbed: the agreement page is read widely."""
        return item_snippet(self.item)

    @property
    def verdicts_agree(self) -> bool:
        return self.first.verdict == self.second.verdict

    @property
    def categories_agree(self) -> bool:
        both_failures = self.first.verdict == self.second.verdict == Label.Verdict.FAILURE
        return not both_failures or self.first.category_id == self.second.category_id

    @property
    def agrees(self) -> bool:
        return self.verdicts_agree and self.categories_agree


@dataclass
class CategoryAgreement:
    category: Category | None
    items: int
    agreed: int
    kappa: float | None

    @property
    def agreed_percent(self) -> int:
        return round(100 * self.agreed / self.items) if self.items else 0


@dataclass
class Agreement:
    rows: list[CategoryAgreement]
    overall: CategoryAgreement
    disagreements: list[Pair]
    requested: int
    waiting: int


def verdict_kappa(first: list[str], second: list[str]) -> float | None:
    """Cohen's kappa of two reviewers' verdicts; None where it is undefined.

    Kappa is undefined when both reviewers used one and the same verdict for
    every item (chance agreement is then 1): the page shows the plain
    agreement instead of a number that means nothing.
    """
    if not first or len(set(first) | set(second)) < 2:
        return None
    return float(cohen_kappa_score(first, second, labels=Label.Verdict.values))


def _agreement_of(category: Category | None, pairs: list[Pair]) -> CategoryAgreement:
    return CategoryAgreement(
        category=category,
        items=len(pairs),
        agreed=sum(pair.verdicts_agree for pair in pairs),
        kappa=verdict_kappa([p.first.verdict for p in pairs], [p.second.verdict for p in pairs]),
    )


def agreement_summary() -> Agreement:
    """Per category: Cohen's kappa between the first two reviews of each double-reviewed item.

    An item's category is its first label's, else its assignment's. Two
    queries however many items were sampled.
    """
    labels = (
        Label.objects.filter(item__double_review__isnull=False)
        .select_related("reviewer", "category", "item__assignment__category")
        .defer("item__raw_payload", "item__context", "item__embed_text")
        .order_by("item_id", "created_at", "id")
    )
    by_item: dict[int, list[Label]] = {}
    for label in labels:
        by_item.setdefault(label.item_id, []).append(label)
    pairs: list[Pair] = []
    for item_labels_ in by_item.values():
        if len(item_labels_) < 2:
            continue
        first, second = item_labels_[:2]
        item = first.item
        category = first.category
        if category is None and item_assignment(item) is not None:
            category = item.assignment.category
        pairs.append(Pair(item=item, first=first, second=second, category=category))
    grouped: dict[int | None, list[Pair]] = {}
    for pair in pairs:
        grouped.setdefault(pair.category.id if pair.category else None, []).append(pair)
    rows = [_agreement_of(group[0].category, group) for group in grouped.values()]
    rows.sort(key=lambda row: (-row.items, row.category.name if row.category else ""))
    requested = DoubleReview.objects.count()
    return Agreement(
        rows=rows,
        overall=_agreement_of(None, pairs),
        disagreements=[pair for pair in pairs if not pair.agrees],
        requested=requested,
        waiting=requested - len(pairs),
    )


SETTLED_SHOWN = 50


def labels_disagree(labels: Sequence[Label]) -> bool:
    """Do an item's labels give different verdicts, or put one failure in different categories?"""
    verdicts = {label.verdict for label in labels}
    if len(verdicts) > 1:
        return True
    return verdicts == {Label.Verdict.FAILURE} and len({label.category_id for label in labels}) > 1


def labels_fingerprint(labels: Sequence[Label]) -> dict[str, str]:
    """Each label's id and last change: what a settlement was made against."""
    return {str(label.id): label.updated_at.isoformat() for label in labels}


def settlement_holds(settlement: Settlement | None, labels: Sequence[Label]) -> bool:
    """Is the settlement still about these labels? A label changed or added since reopens the dispute."""
    return settlement is not None and settlement.labels_seen == labels_fingerprint(labels)


def settled_label(settlement: Settlement) -> Label:
    """The settlement in the shape of a label (unsaved), for readers such as the exports that take one."""
    return Label(
        id=settlement.label_id,
        item_id=settlement.item_id,
        verdict=settlement.verdict,
        category=settlement.category,
        severity=settlement.severity,
        tags=list(settlement.tags),
        hint=settlement.hint,
        corrected_response=settlement.corrected_response,
        split=settlement.split,
        updated_at=settlement.settled_at,
    )


def may_settle(user, labels: Sequence[Label]) -> bool:
    """Admins settle any dispute; a reviewer only one they gave no label in, so nobody judges their own."""
    return is_admin(user) or all(label.reviewer_id != user.id for label in labels)


@dataclass
class Dispute:
    item: FeedbackItem
    # Oldest first, so "first review" reads as it happened.
    labels: list[Label]
    # The latest settlement, standing or reopened by a label changed since.
    settlement: Settlement | None

    @property
    def settled(self) -> bool:
        return settlement_holds(self.settlement, self.labels)

    @property
    def reopened(self) -> bool:
        return self.settlement is not None and not self.settled

    @property
    def preview(self) -> str:
        return item_snippet(self.item)


@dataclass
class Disputes:
    open: list[Dispute]
    # The most recently settled, newest first (at most SETTLED_SHOWN).
    settled: list[Dispute]
    settled_total: int


def disputes_list() -> Disputes:
    """Every item whose labels disagree, open ones first; three queries however many there are."""
    several = Label.objects.order_by().values("item_id").annotate(n=Count("id")).filter(n__gte=2).values("item_id")
    labels = (
        Label.objects.filter(item_id__in=several)
        .select_related("reviewer", "category", "item")
        .defer("item__raw_payload", "item__context", "item__embed_text")
        .order_by("item_id", "created_at", "id")
    )
    by_item: dict[int, list[Label]] = {}
    for label in labels:
        by_item.setdefault(label.item_id, []).append(label)
    contested = {item_id: group for item_id, group in by_item.items() if labels_disagree(group)}
    settlements = {
        settlement.item_id: settlement
        for settlement in Settlement.objects.filter(item_id__in=list(contested)).select_related("settled_by", "category")
    }
    disputes = [
        Dispute(item=group[0].item, labels=group, settlement=settlements.get(item_id))
        for item_id, group in contested.items()
    ]
    settled = sorted((d for d in disputes if d.settled), key=lambda d: d.settlement.settled_at, reverse=True)
    return Disputes(
        open=[dispute for dispute in disputes if not dispute.settled],
        settled=settled[:SETTLED_SHOWN],
        settled_total=len(settled),
    )
