"""An inspection's trail, its granted snapshot and the record of its reads refuse UPDATE,
DELETE and TRUNCATE, like the other ledgers."""

from django.db import migrations

from governance.append_only import migration_operations


class Migration(migrations.Migration):
    dependencies = [("inspection", "0001_initial")]

    operations = [
        migration_operations("inspection_inspectiontransition"),
        migration_operations("inspection_snapshotitem"),
        migration_operations("inspection_snapshotread"),
    ]
