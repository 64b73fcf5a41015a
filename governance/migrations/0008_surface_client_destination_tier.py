"""Surface clients declare the tier their model runs on.

Every client registered before this migration becomes `cloud`: nobody said where its
model runs, and cloud is the tier under which nothing personal leaves (what such a
client received before, when it named no tier). An operator who knows a client's model
runs locally registers a new client with `create_surface_client --tier local`.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0007_runs_belong_to_a_surface"),
    ]

    operations = [
        migrations.AddField(
            model_name="surfaceclient",
            name="destination_tier",
            field=models.CharField(
                choices=[("local", "Local"), ("cloud", "Cloud")], default="cloud", max_length=8
            ),
        ),
    ]
