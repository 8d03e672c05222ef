from django.db import migrations, models

import feedback.models


def grant_existing_tokens_every_scope(apps, schema_editor):
    # Tokens made before scopes existed could use every API: keep them working.
    apps.get_model("feedback", "ApiToken").objects.update(scopes=["reports", "datasets", "compare"])


class Migration(migrations.Migration):

    dependencies = [
        ('feedback', '0003_source_scrub_patterns'),
    ]

    operations = [
        migrations.AddField(
            model_name='apitoken',
            name='scopes',
            field=models.JSONField(blank=True, default=feedback.models.default_token_scopes),
        ),
        migrations.RunPython(grant_existing_tokens_every_scope, migrations.RunPython.noop),
    ]
