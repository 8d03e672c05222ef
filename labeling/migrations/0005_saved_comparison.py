# Saved model-version comparisons (labeling.models.SavedComparison).

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("labeling", "0004_audit_keeps_history"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="SavedComparison",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(blank=True, default="", max_length=200)),
                ("a_version", models.CharField(max_length=100)),
                ("a_variant", models.CharField(blank=True, default="", max_length=100)),
                ("b_version", models.CharField(max_length=100)),
                ("b_variant", models.CharField(blank=True, default="", max_length=100)),
                ("date_from", models.DateField(blank=True, null=True)),
                ("date_to", models.DateField(blank=True, null=True)),
                ("window_days", models.PositiveIntegerField(blank=True, null=True)),
                ("pinned", models.BooleanField(default=True, help_text="Shown and watched on the overview page.")),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "created_by",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "ordering": ["-created_at", "-id"],
            },
        ),
    ]
