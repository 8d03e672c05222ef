from django.db import migrations

import feedback.encryption


def encrypt_stored_secrets(apps, schema_editor):
    # Rows read back plain (no prefix) and are written encrypted by the field.
    for source in apps.get_model("feedback", "Source").objects.all():
        source.save(update_fields=["signing_secret", "previous_signing_secret"])


def decrypt_stored_secrets(apps, schema_editor):
    Source = apps.get_model("feedback", "Source")
    for source_id, current, previous in Source.objects.values_list("id", "signing_secret", "previous_signing_secret"):
        # values_list applies the field's decryption; update() with plain text would encrypt
        # again, so write through a raw UPDATE.
        schema_editor.execute(
            f"UPDATE {Source._meta.db_table} SET signing_secret = %s, previous_signing_secret = %s WHERE id = %s",
            [current, previous, source_id],
        )


class Migration(migrations.Migration):

    dependencies = [
        ('feedback', '0004_apitoken_scopes'),
    ]

    operations = [
        migrations.AlterField(
            model_name='source',
            name='previous_signing_secret',
            field=feedback.encryption.EncryptedSecretField(blank=True, default='', max_length=400),
        ),
        migrations.AlterField(
            model_name='source',
            name='signing_secret',
            field=feedback.encryption.EncryptedSecretField(max_length=400),
        ),
        migrations.RunPython(encrypt_stored_secrets, decrypt_stored_secrets),
    ]
