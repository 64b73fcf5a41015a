# Who set a pause or off the record: a surface lifts only what it set (memory/controls.py).
# Nullable and empty by default: adding them rewrites no row, and older rows count as the
# member's.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0008_recall_change_log"),
    ]

    operations = [
        migrations.AddField(
            model_name="memoryentry",
            name="suppression_set_by",
            field=models.CharField(blank=True, max_length=80, null=True),
        ),
        migrations.AddField(
            model_name="offtherecord",
            name="set_by",
            field=models.CharField(blank=True, default="", max_length=80),
        ),
    ]
