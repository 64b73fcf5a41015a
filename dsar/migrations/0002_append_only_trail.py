"""A request's trail refuses UPDATE, DELETE and TRUNCATE, like the other ledgers."""

from django.db import migrations

from governance.append_only import migration_operations


class Migration(migrations.Migration):
    dependencies = [("dsar", "0001_initial")]

    operations = [migration_operations("dsar_datarightsevent")]
