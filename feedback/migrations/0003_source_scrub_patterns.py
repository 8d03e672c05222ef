from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('feedback', '0002_item_changed_index'),
    ]

    operations = [
        migrations.AddField(
            model_name='source',
            name='scrub_patterns',
            field=models.JSONField(blank=True, default=list),
        ),
    ]
