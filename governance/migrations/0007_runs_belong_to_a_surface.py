# A run id names a run of one surface, so one surface cannot taint another's run. The new
# constraint comes first, so the table is never without one.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0006_operator_totp"),
    ]

    operations = [
        migrations.AddConstraint(
            model_name="run",
            constraint=models.UniqueConstraint(
                fields=("tenant", "surface", "run_id"), name="governance_run_surface_run"
            ),
        ),
        migrations.RemoveConstraint(
            model_name="run",
            name="governance_run_tenant_run",
        ),
    ]
