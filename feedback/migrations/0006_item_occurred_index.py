
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('feedback', '0005_encrypt_signing_secrets'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddIndex(
            model_name='feedbackitem',
            index=models.Index(fields=['-occurred_at', '-id'], name='feedback_item_occurred'),
        ),
    ]
