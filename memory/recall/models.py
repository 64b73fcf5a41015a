"""Recall's own tables: the member-visible recall history and per-revision embeddings.

Imported at the end of `memory.models` so Django finds them in the `memory` app.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

__all__ = ["MemoryEmbedding", "RecallEvent"]


class RecallEvent(models.Model):
    """One entry surfaced by one recall: where (surface, scope), when, and why.

    The member's memory page reads these. `rationale` is the surface rationale *without*
    the matched query words, so the history holds no query text and no body text: forgetting
    an entry needs nothing here beyond its id (DESIGN invariants 4 and 7).
    """

    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey("governance.Tenant", on_delete=models.PROTECT, related_name="+")
    member = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    entry_id = models.UUIDField()
    surface = models.CharField(max_length=16)
    context = models.CharField(max_length=16)
    scope_key = models.CharField(max_length=700)
    score = models.FloatField()
    rationale = models.TextField(blank=True)
    recalled_at = models.DateTimeField()

    class Meta:
        indexes = [
            models.Index(
                fields=["tenant", "member", "entry_id", "-recalled_at"],
                name="memory_recall_history",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.entry_id} recalled {self.recalled_at:%Y-%m-%d %H:%M}"


class MemoryEmbedding(models.Model):
    """The embedding of one revision's body (all-MiniLM-L6-v2, 384 float32, little-endian).

    Keyed by the revision and deleted with it (CASCADE), so a hard delete of a revision
    removes what was derived from its text as well.
    """

    revision = models.OneToOneField(
        "memory.MemoryEntry",
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="+",
        db_column="revision_id",
    )
    tenant = models.ForeignKey("governance.Tenant", on_delete=models.PROTECT, related_name="+")
    model = models.CharField(max_length=64)
    vector = models.BinaryField()
    created_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"embedding of {self.revision_id}"
