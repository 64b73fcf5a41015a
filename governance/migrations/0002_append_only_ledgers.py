from django.db import migrations

from governance.append_only import migration_operations


class Migration(migrations.Migration):
    dependencies = [("governance", "0001_initial")]

    operations = [
        migration_operations("governance_auditevent"),
        migration_operations("governance_auditseal"),
    ]
