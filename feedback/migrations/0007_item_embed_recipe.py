from django.db import migrations, models


class Migration(migrations.Migration):
    """Rows from before the text recipe was versioned were made by recipe 1.

    The column is added with 1 for them, then defaults to the current recipe
    (`feedback.text.EMBED_RECIPE`): the sweeper and `manage.py reembed`
    bring the old rows up to date.
    """

    dependencies = [
        ("feedback", "0006_item_occurred_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="feedbackitem",
            name="embed_recipe",
            field=models.PositiveSmallIntegerField(default=1),
            preserve_default=False,
        ),
        migrations.AlterField(
            model_name="feedbackitem",
            name="embed_recipe",
            field=models.PositiveSmallIntegerField(default=2),
        ),
    ]
