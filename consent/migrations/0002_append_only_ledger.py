"""The consent chain refuses UPDATE, DELETE and TRUNCATE; its bodies refuse UPDATE only,
because erasure deletes them (consent.services.consent_purge_categories)."""

from django.db import migrations

from governance.append_only import migration_operations


class Migration(migrations.Migration):
    dependencies = [("consent", "0001_initial")]

    operations = [
        migration_operations("consent_consentevent"),
        migration_operations("consent_consenteventbody", allow_delete=True),
    ]
