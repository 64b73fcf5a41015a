# The retention review flag becomes a column of the current revision. Until now the job
# found flagged entries by reading its own audit events back; the events stay (they are the
# record) and are copied here once, so an entry flagged before keeps its flag.

from django.db import migrations, models

OLD_REVIEW_ACTION = "iris.memory.entry.retention_review_due"


def copy_flags_from_the_audit_chain(apps, schema_editor):
    AuditEvent = apps.get_model("governance", "AuditEvent")
    MemoryEntry = apps.get_model("memory", "MemoryEntry")
    first_flagged: dict[str, object] = {}
    events = (
        AuditEvent.objects.filter(action=OLD_REVIEW_ACTION)
        .order_by("seq")
        .values_list("payload", "occurred_at")
        .iterator()
    )
    for payload, occurred_at in events:
        entry_id = (payload or {}).get("entryId")
        if entry_id:
            first_flagged.setdefault(str(entry_id), occurred_at)
    for entry_id, flagged_at in first_flagged.items():
        MemoryEntry.objects.filter(entry_id=entry_id, is_current=True).update(
            retention_review_flagged_at=flagged_at
        )


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0007_runs_belong_to_a_surface"),
        ("memory", "0009_who_set_a_control"),
    ]

    operations = [
        migrations.AddField(
            model_name="memoryentry",
            name="retention_review_flagged_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        # Nothing to undo on the way back: the column goes, the audit events never moved.
        migrations.RunPython(copy_flags_from_the_audit_chain, migrations.RunPython.noop),
    ]
