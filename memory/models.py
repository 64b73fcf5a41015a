"""What Iris remembers, stored: immutable revisions of memory entries and their companions.

Every member-data table carries `tenant` and leads its indexes with it (DESIGN "Scale past
one machine"). Rows change only through `memory.services`; the guards below refuse the
changes that would break DESIGN invariant 2 ("revisions are immutable") even if someone
reaches past the services.
"""

from __future__ import annotations

import uuid
from typing import Any, cast

from django.conf import settings
from django.db import models
from django.db.models import Q

from consent.enums import AdapterScope, Category
from memory.enums import Lifecycle, Origin, ScopeKind, SuppressionReason
from memory.rules.masking import RELATIONSHIP_NOTE_MAX_LENGTH

BODY_MAX_LENGTH = 4000
SUBJECT_MAX_LENGTH = 200
SUPPRESSION_NOTES_MAX_LENGTH = 500
SCOPE_KEY_MAX_LENGTH = 700
SESSION_ID_MAX_LENGTH = 128
FINGERPRINT_LENGTH = 64


def _choices(enum: Any) -> list[tuple[str, str]]:
    return [(member.value, member.value) for member in enum]


# The columns of a stored revision that may ever change after it was written:
# - `lifecycle` and `is_current`, when a newer revision supersedes it (the one flip an old
#   revision allows);
# - usage counters of the current revision, which recall bumps (a use is not a change of
#   what is remembered, and a revision per recall would bury the real history);
# - the retention job's review flag on the current revision (it says what is owed to the
#   memory, not what the memory says).
# Erasure does not update text: a hard delete removes the rows (see services).
MUTABLE_REVISION_FIELDS = frozenset(
    {
        "lifecycle",
        "is_current",
        "reference_count",
        "last_referenced_at",
        "retention_review_flagged_at",
    }
)


class RevisionImmutable(Exception):
    """Somebody tried to change the content of a stored revision."""


class RevisionQuerySet(models.QuerySet):
    def update(self, **kwargs: Any) -> int:
        changed = set(kwargs) - MUTABLE_REVISION_FIELDS
        if changed:
            raise RevisionImmutable(
                f"memory revisions are immutable; refused update of {sorted(changed)}"
            )
        return super().update(**kwargs)


# Sets a Jaccard token's key apart from a BM25 term's ("42:~walked" and "42:walk").
JACCARD_MARK = "~"


def recall_term_keys(member_id: Any, body: str) -> str:
    """What `MemoryEntry.recall_terms` holds, each key prefixed by the member so a GIN
    lookup reads one member's postings only: the body's distinct BM25 terms (the very
    `memory.rules.lexical.terms` ranking uses: "42:walk") and its Jaccard tokens (the very
    `memory.recall.tokens`: "42:~walked"). A body that is not plain ASCII gets the single
    key "42:" instead: recall always hands those rows to Python."""
    from memory.recall.pipeline import tokens
    from memory.rules.lexical import terms

    if not body.isascii():
        return f"{member_id}:"
    keys = {f"{member_id}:{t}" for t in terms(body)}
    keys.update(f"{member_id}:{JACCARD_MARK}{t}" for t in tokens(body))
    return " ".join(sorted(keys))


class RecallTermsField(models.TextField):
    """Filled from the row's own body and member whenever the row is inserted (`save`
    and `bulk_create` alike); revisions are immutable, so it never goes stale."""

    def pre_save(self, model_instance: models.Model, add: bool) -> str:
        # The field is declared on MemoryEntry only.
        entry = cast("MemoryEntry", model_instance)
        value = recall_term_keys(entry.member_id, entry.body)
        setattr(model_instance, self.attname, value)
        return value


# Parts `MemoryEntry.recall_words` into its BM25 half and its Jaccard half.
WORDS_SPLIT = "|"


def recall_words(body: str) -> str:
    """What `MemoryEntry.recall_words` holds: the body's BM25 terms, each as often as the
    body has it (the very `memory.rules.lexical.terms`), then its distinct Jaccard tokens
    (the very `memory.recall.tokens`), each half sorted and space-joined, parted by
    `WORDS_SPLIT`: "lisbon live live|lisbon live lived". Neither tokeniser yields a space or
    the split mark (both keep runs of letters and digits), so a split gives them back.

    A member's recall snapshot is built from these instead of tokenising every body again
    (`memory.recall.snapshot`: tokenising was a quarter of a first recall at 1k rows)."""
    from memory.recall.pipeline import tokens
    from memory.rules.lexical import terms

    return f"{' '.join(sorted(terms(body)))}{WORDS_SPLIT}{' '.join(sorted(tokens(body)))}"


class RecallWordsField(models.TextField):
    """Filled from the row's own body whenever the row is inserted, like `recall_terms`.
    Null only on a row written before the column existed and not yet backfilled (or copied
    in by hand): a snapshot tokenises that row's body instead."""

    def pre_save(self, model_instance: models.Model, add: bool) -> str:
        entry = cast("MemoryEntry", model_instance)
        value = recall_words(entry.body)
        setattr(model_instance, self.attname, value)
        return value


class MemoryEntry(models.Model):
    """One revision of one memory entry (spec: "The MemoryEntry Contract").

    All revisions of an entry share `entry_id` (the wire's `id`); each revision has its own
    `revision_id`. Exactly one revision per entry is current. `created_at` is when the
    entry was first written and is carried over; `updated_at` is when this revision was.
    `scope_identifiers` holds the wire scope object minus `kind`.
    """

    revision_id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    entry_id = models.UUIDField(default=uuid.uuid4, editable=False)
    revision = models.PositiveIntegerField()
    supersedes = models.UUIDField(null=True, blank=True)
    is_current = models.BooleanField(default=True)

    tenant = models.ForeignKey("governance.Tenant", on_delete=models.PROTECT, related_name="+")
    member = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")

    scope_kind = models.CharField(max_length=24, choices=_choices(ScopeKind))
    scope_key = models.CharField(max_length=SCOPE_KEY_MAX_LENGTH)
    scope_identifiers = models.JSONField(default=dict)
    adapter_scope = models.CharField(max_length=24, choices=_choices(AdapterScope))
    category = models.CharField(max_length=32, choices=_choices(Category))

    body = models.TextField()
    # Keyed SHA-256 of the body: what the audit chain and the forget records keep.
    body_fingerprint = models.CharField(max_length=FINGERPRINT_LENGTH)
    subject = models.CharField(max_length=SUBJECT_MAX_LENGTH, blank=True)
    origin = models.CharField(max_length=32, choices=_choices(Origin))
    lifecycle = models.CharField(max_length=16, choices=_choices(Lifecycle))

    suppression_reason = models.CharField(
        max_length=24, choices=_choices(SuppressionReason), null=True, blank=True
    )
    suppression_started_at = models.DateTimeField(null=True, blank=True)
    suppression_ends_at = models.DateTimeField(null=True, blank=True)
    # Who set a user-pause (`memory.controls.lifter_of`): a surface lifts only its own.
    # Null on older rows, which count as the member's.
    suppression_set_by = models.CharField(max_length=80, null=True, blank=True)
    suppression_notes = models.CharField(
        max_length=SUPPRESSION_NOTES_MAX_LENGTH, blank=True, default=""
    )

    actor_handle = models.CharField(max_length=40, null=True, blank=True)
    relationship_note = models.CharField(
        max_length=RELATIONSHIP_NOTE_MAX_LENGTH, blank=True, default=""
    )
    sensitive_interaction = models.BooleanField(default=False)

    consents = models.JSONField(default=list)  # ConsentEntry wire dicts, as at the write
    provenance_chain = models.JSONField(default=list)  # [{kind, ref, capturedAt}]
    # Set on a member's read-only copy of tenant memory: the tenant entry it copies.
    read_only_copy_of = models.UUIDField(null=True, blank=True)

    reference_count = models.PositiveIntegerField(default=0)
    last_referenced_at = models.DateTimeField(null=True, blank=True)
    # When the retention job queued the entry for a person's review (a `review` envelope
    # ran out). Not carried to the next revision: the revision a person's correction,
    # confirmation, pause, resume, move or forget writes is their answer to the review.
    retention_review_flagged_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    # Derived from `body` at insert, for recall's term index (PostgreSQL GIN, migration
    # 0004); stemmed words of the body, so it goes wherever the body goes.
    recall_terms = RecallTermsField(editable=False, blank=True, default="")
    # Derived from `body` at insert, for building recall snapshots: the body's terms with
    # their counts and its Jaccard tokens (`recall_words`); goes wherever the body goes.
    recall_words = RecallWordsField(editable=False, null=True, blank=True)

    objects = RevisionQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["entry_id", "revision"], name="memory_entry_revision"),
            models.UniqueConstraint(
                fields=["entry_id"], condition=Q(is_current=True), name="memory_one_current"
            ),
            models.CheckConstraint(condition=Q(revision__gte=1), name="memory_revision_positive"),
            models.CheckConstraint(condition=~Q(body=""), name="memory_body_not_empty"),
            models.CheckConstraint(
                condition=Q(lifecycle__in=[lc.value for lc in Lifecycle]),
                name="memory_lifecycle_known",
            ),
            # A revision that is superseded is never current, and the other way round.
            models.CheckConstraint(
                condition=Q(is_current=False, lifecycle=Lifecycle.SUPERSEDED.value)
                | (Q(is_current=True) & ~Q(lifecycle=Lifecycle.SUPERSEDED.value)),
                name="memory_current_not_superseded",
            ),
            # Suppression is one nullable object: a reason and a start, or neither.
            models.CheckConstraint(
                condition=Q(suppression_reason__isnull=True, suppression_started_at__isnull=True)
                | Q(suppression_reason__isnull=False, suppression_started_at__isnull=False),
                name="memory_suppression_whole",
            ),
        ]
        indexes = [
            # Recall and the member's list: current rows of one member by lifecycle and kind.
            models.Index(
                fields=["tenant", "member", "lifecycle", "scope_kind"],
                condition=Q(is_current=True),
                name="memory_current_lc_kind",
            ),
            # Recall's fast path reads the current rows of the reachable scope keys.
            models.Index(
                fields=["tenant", "member", "scope_key"],
                condition=Q(is_current=True),
                name="memory_current_scope_key",
            ),
            # Recall's envelope counts the current rows that are not active (paused,
            # forgotten, drafts) at every recall: this index holds only those, so the count
            # does not walk the member's active rows (docs/decisions/recall.md).
            models.Index(
                fields=["tenant", "member", "scope_key"],
                condition=Q(is_current=True) & ~Q(lifecycle="active"),
                name="memory_current_inactive",
            ),
            models.Index(fields=["tenant", "member", "entry_id"], name="memory_entry_lookup"),
            # Conflict lookup by category and subject; the revocation cascade by category.
            models.Index(
                fields=["tenant", "member", "category", "subject"], name="memory_conflict_lookup"
            ),
            models.Index(
                fields=["tenant", "member", "actor_handle"],
                condition=Q(actor_handle__isnull=False),
                name="memory_actor_lookup",
            ),
            # The member's list pages by recency.
            models.Index(
                fields=["tenant", "member", "-updated_at", "revision_id"],
                condition=Q(is_current=True),
                name="memory_current_recent",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.entry_id}@{self.revision}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        # A guard, not business logic: the services insert revisions and flip the one
        # allowed column through `update`; any other save of a stored row is a bug.
        if not self._state.adding:
            update_fields = kwargs.get("update_fields")
            if update_fields is None or set(update_fields) - MUTABLE_REVISION_FIELDS:
                raise RevisionImmutable("memory revisions are immutable")
        super().save(*args, **kwargs)

    @property
    def multi_actor(self) -> bool:
        return self.actor_handle is not None


class PendingConflict(models.Model):
    """A write that contradicts what the member said, waiting for the member's answer.

    `proposal` holds the proposed write (its body included) until the conflict is
    answered, replaced or expires; then it is emptied and only `proposal_fingerprint`
    remains. The audit chain only ever sees fingerprints.
    """

    class Status(models.TextChoices):
        OPEN = "open"
        ANSWERED = "answered"
        REPLACED = "replaced"
        EXPIRED = "expired"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey("governance.Tenant", on_delete=models.PROTECT, related_name="+")
    member = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    entry_id = models.UUIDField()
    prior_revision_id = models.UUIDField()
    rule = models.CharField(max_length=48)
    ladder_winner = models.CharField(max_length=16)
    proposal = models.JSONField(default=dict)
    proposal_fingerprint = models.CharField(max_length=FINGERPRINT_LENGTH)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN)
    answer = models.CharField(max_length=16, blank=True)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["entry_id"], condition=Q(status="open"), name="memory_one_open_conflict"
            ),
            # Text lives in a proposal only while the question is open.
            models.CheckConstraint(
                condition=Q(status="open") | Q(proposal={}), name="memory_closed_conflict_empty"
            ),
        ]
        indexes = [
            models.Index(fields=["tenant", "member", "status"], name="memory_conflict_member"),
            models.Index(fields=["tenant", "status", "expires_at"], name="memory_conflict_expiry"),
        ]


class ActorNamespace(models.Model):
    """A member's secret key for actor handles: 32 random bytes, encrypted (MultiFernet).

    A random key per member (rather than one derived from the master key) means handles
    of two members cannot be linked even by someone holding the master key and a guess
    at a name, unless they also decrypt this row.
    """

    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey("governance.Tenant", on_delete=models.PROTECT, related_name="+")
    member = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    encrypted_key = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "member"], name="memory_one_namespace")
        ]


class ActorHandle(models.Model):
    """A handle in use in a member's namespace; removed by "forget all mentions"."""

    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey("governance.Tenant", on_delete=models.PROTECT, related_name="+")
    member = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    handle = models.CharField(max_length=40)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "member", "handle"], name="memory_actor_handle_unique"
            )
        ]


class InferenceObservation(models.Model):
    """One session in which the model inferred a fact; promotion counts distinct sessions.

    Only keyed fingerprints of the conflict key and the value are kept, never the text.
    """

    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey("governance.Tenant", on_delete=models.PROTECT, related_name="+")
    member = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    conflict_fingerprint = models.CharField(max_length=FINGERPRINT_LENGTH)
    value_fingerprint = models.CharField(max_length=FINGERPRINT_LENGTH)
    session_id = models.CharField(max_length=SESSION_ID_MAX_LENGTH)
    seen_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=[
                    "tenant",
                    "member",
                    "conflict_fingerprint",
                    "value_fingerprint",
                    "session_id",
                ],
                name="memory_observation_once_per_session",
            )
        ]
        indexes = [
            models.Index(
                fields=["tenant", "member", "conflict_fingerprint"], name="memory_observation_key"
            )
        ]


class ForgottenValue(models.Model):
    """A keyed fingerprint of text the member forgot or refused (DESIGN invariant 2:
    nothing is silently re-created from old text). Inferred, summarised and imported
    writes of the same value are dropped; the member saying it again is not silent."""

    class Reason(models.TextChoices):
        FORGOTTEN = "forgotten"
        HARD_DELETED = "hard-deleted"
        REJECTED = "rejected"

    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey("governance.Tenant", on_delete=models.PROTECT, related_name="+")
    member = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    entry_id = models.UUIDField(null=True, blank=True)
    value_fingerprint = models.CharField(max_length=FINGERPRINT_LENGTH)
    reason = models.CharField(max_length=16, choices=Reason.choices)
    created_at = models.DateTimeField()

    class Meta:
        indexes = [
            models.Index(
                fields=["tenant", "member", "value_fingerprint"], name="memory_forgotten_value"
            )
        ]


class OffTheRecord(models.Model):
    """The member's off-the-record toggle: while a row matches, memory writes store nothing.

    An empty `session_id` covers every session and an empty `surface` every surface, so a
    row with both empty pauses all memory writes for the member. The row is the state, so
    the toggle survives a reconnect, a new device and a server restart.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey("governance.Tenant", on_delete=models.PROTECT, related_name="+")
    member = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    session_id = models.CharField(max_length=SESSION_ID_MAX_LENGTH, blank=True, default="")
    surface = models.CharField(max_length=32, blank=True, default="")
    since = models.DateTimeField()
    # Who switched it on (`memory.controls.lifter_of`); empty on older rows, the member's.
    set_by = models.CharField(max_length=80, blank=True, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "member", "session_id", "surface"], name="memory_otr_unique"
            )
        ]


from memory.recall.models import *  # noqa: E402,F401,F403
