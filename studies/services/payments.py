"""Paying reviewers and idea authors: the owner's accept/reject decision on each submitted
review, and the study's payment run (who is owed what) built from rows by the pure
`protocol.payments`. Nothing here is shown to reviewers. The owners' CSV names each
reviewer beside their pseudonym (name, email, payment details), so a person can pay
them; nothing else leaves with those."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from .. import csvsafe
from ..models import Review, ReviewAcceptance, Reviewer, ReviewScore, Study
from ..protocol import payments as pay
from ..selectors import idea_labels
from ..status import PAYS, refuse_if_imported
from .audit import audit
from .ideas import study_ideas


class PaymentError(ValueError):
    """A decision that cannot be taken; the message is for the owner."""


def review_decide(*, review: Review, decision: str, reason: str = "", actor: Any) -> None:
    """Accept or reject a submitted review for payment; a rejection needs a reason.
    Deciding again replaces the earlier decision (the audit log keeps both). From then on
    the reviewer can no longer change the review (services/reviews.py, review_decided)."""
    refuse_if_imported(review.study, PAYS)
    reason = reason.strip()
    if review.status != Review.Status.SUBMITTED:
        raise PaymentError("only submitted reviews can be accepted or rejected")
    if decision not in (pay.ACCEPTED, pay.REJECTED):
        raise PaymentError("choose accept or reject")
    if decision == pay.REJECTED and not reason:
        raise PaymentError("say why the review is rejected")
    with transaction.atomic():
        # The review's lock, as review_submit takes it: a submit in progress ends first,
        # and the decision is on the answers it stored.
        locked = Review.objects.select_for_update().get(pk=review.pk)
        if locked.status != Review.Status.SUBMITTED:
            raise PaymentError("only submitted reviews can be accepted or rejected")
        ReviewAcceptance.objects.update_or_create(
            review=review,
            defaults={
                "decision": decision,
                "reason": reason,
                "decided_by": actor if getattr(actor, "pk", None) else None,
                "decided_at": timezone.now(),
            },
        )
        audit(
            study=review.study,
            actor=actor,
            verb=f"review_{decision}",
            review=review.pk,
            reason=reason,
        )


def reviews_accept_undecided(*, study: Study, actor: Any) -> int:
    """Accept every submitted review that has no decision yet (one audit event)."""
    refuse_if_imported(study, PAYS)
    with transaction.atomic():
        # Locked as review_decide locks one review.
        undecided = list(
            Review.objects.select_for_update(of=("self",))
            .filter(study=study, status=Review.Status.SUBMITTED, acceptance__isnull=True)
            .values_list("pk", flat=True)
        )
        now = timezone.now()
        ReviewAcceptance.objects.bulk_create(
            [
                ReviewAcceptance(
                    review_id=pk,
                    decision=pay.ACCEPTED,
                    decided_by=actor if getattr(actor, "pk", None) else None,
                    decided_at=now,
                )
                for pk in undecided
            ]
        )
        audit(study=study, actor=actor, verb="reviews_accepted_undecided", n=len(undecided))
    return len(undecided)


def payment_seed_default(study: Study) -> int:
    """A seed fixed per study (so the page and its CSV agree without being told)."""
    digest = hashlib.sha256(f"payments:{study.pk}:{study.slug}".encode()).hexdigest()
    return int(digest[:8], 16)


def study_rates(study: Study) -> pay.Rates:
    return pay.Rates(
        per_review=study.payment_per_review,
        per_idea=study.payment_per_idea,
        bonus=study.payment_bonus,
        top_k=study.payment_bonus_top_k,
        currency=study.payment_currency,
    )


def payment_records(study: Study) -> tuple[list[pay.ReviewRecord], list[pay.IdeaAuthor]]:
    """The study's submitted reviews and its ideas as the pure module's records."""
    labels = idea_labels(study)
    overall = dict(
        ReviewScore.objects.filter(review__study=study, metric="overall").values_list(
            "review_id", "score"
        )
    )
    reviews = [
        pay.ReviewRecord(
            reviewer=r.reviewer.pseudonym if r.reviewer else "(no reviewer)",
            idea=labels.get(r.idea_id, f"idea-{r.idea_id}"),
            overall=overall.get(r.pk),
            decision=getattr(getattr(r, "acceptance", None), "decision", pay.PENDING),
        )
        for r in Review.objects.filter(study=study, status=Review.Status.SUBMITTED)
        .select_related("reviewer", "acceptance")
        .order_by("pk")
    ]
    ideas = [
        pay.IdeaAuthor(idea=labels.get(i.pk, f"idea-{i.pk}"), author=i.author_contact)
        for i in study_ideas(study).order_by("pk")
    ]
    return reviews, ideas


def study_payment_run(*, study: Study, seed: int | None = None) -> pay.PaymentRun:
    reviews, ideas = payment_records(study)
    return pay.payment_run(
        reviews=reviews,
        ideas=ideas,
        rates=study_rates(study),
        seed=payment_seed_default(study) if seed is None else seed,
    )


@dataclass(frozen=True)
class PayeeContact:
    """Who a reviewer pseudonym is, for the person who pays them."""

    name: str
    email: str
    payment_handle: str


def payment_contacts(study: Study) -> dict[str, PayeeContact]:
    """Each reviewer's name, email and payment details by pseudonym: for the owners'
    payments CSV only (the reproducibility package and every other export keep
    pseudonyms)."""
    contacts = {}
    for rev in Reviewer.objects.filter(study=study).select_related("user"):
        user = rev.user
        name = rev.name or (user.get_full_name() if user else "")
        email = (user.email if user else "") or rev.email
        contacts[rev.pseudonym] = PayeeContact(name, email, rev.payment_handle)
    return contacts


def payments_export_csv(
    *, study: Study, seed: int | None, contacts: bool, actor: Any
) -> tuple[pay.PaymentRun, str]:
    """The payment run's CSV (with the reviewers' contacts when ``contacts``: owners
    only), recorded in the audit log: each export is a run someone may act on."""
    refuse_if_imported(study, PAYS)
    run = study_payment_run(study=study, seed=seed)
    who = payment_contacts(study) if contacts else None
    audit(
        study=study,
        actor=actor,
        verb="payments_exported",
        seed=run.seed,
        total=str(run.total),
        currency=run.rates.currency,
        contacts=who is not None,
        payment_handles=sum(1 for c in (who or {}).values() if c.payment_handle),
    )
    return run, payments_csv(run, who)


def payments_csv(run: pay.PaymentRun, contacts: Mapping[str, PayeeContact] | None = None) -> str:
    """One row per payee: reviewers first, then idea authors. With `contacts` (the
    owners' export) each reviewer row also carries name, email and payment details."""
    out = io.StringIO()
    writer = csvsafe.writer(out)
    head = ["payee_type", "payee"]
    if contacts is not None:
        head += ["name", "email", "payment_handle"]
    head += ["reviews_submitted", "reviews_accepted", "reviews_rejected", "reviews_pending"]
    writer.writerow([*head, "ideas", "top_ideas", "amount", "currency"])
    cur = run.rates.currency
    for r in run.reviewers:
        who: list[Any] = []
        if contacts is not None:
            c = contacts.get(r.reviewer, PayeeContact("", "", ""))
            who = [c.name, c.email, c.payment_handle]
        counts = [r.submitted, r.accepted, r.rejected, r.pending]
        writer.writerow(["reviewer", r.reviewer, *who, *counts, "", "", r.amount, cur])
    blank_who = ["", "", ""] if contacts is not None else []
    for a in run.authors:
        writer.writerow(
            [
                "author",
                a.author,
                *blank_who,
                "",
                "",
                "",
                "",
                ";".join(a.ideas),
                ";".join(a.top_ideas),
                a.amount,
                cur,
            ]
        )
    return out.getvalue()
