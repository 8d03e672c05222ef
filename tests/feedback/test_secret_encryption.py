"""Webhook signing secrets are stored encrypted, shown once, and survive a SECRET_KEY rotation."""

import io
import re

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from feedback import encryption, services
from feedback.models import Source
from tests.factories import post_signed, rating_event, source_make

pytestmark = pytest.mark.django_db


def stored(source: Source) -> tuple[str, str]:
    """The two secret columns as the database holds them."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT signing_secret, previous_signing_secret FROM {Source._meta.db_table} WHERE id = %s", [source.id]
        )
        return cursor.fetchone()


def test_the_database_holds_only_ciphertext_and_webhooks_still_verify(client):
    source, secret = source_make("product")
    new_secret = services.source_rotate_secret(source=source)

    current, previous = stored(source)
    assert current.startswith("enc1:") and previous.startswith("enc1:")
    assert secret not in current + previous and new_secret not in current + previous
    source.refresh_from_db()
    assert (source.signing_secret, source.previous_signing_secret) == (new_secret, secret)
    # Both secrets verify during the rotation, read back through the webhook's raw query.
    assert post_signed(client, source, new_secret, rating_event(id="evt_new"), msg_id="evt_new").status_code == 202
    assert post_signed(client, source, secret, rating_event(id="evt_old"), msg_id="evt_old").status_code == 202


def test_a_fixture_dump_holds_ciphertext_and_loads_back(tmp_path):
    source, secret = source_make("product")
    dump = tmp_path / "sources.json"
    call_command("dumpdata", "feedback.source", output=str(dump))
    assert secret not in dump.read_text() and "enc1:" in dump.read_text()

    Source.objects.all().delete()
    call_command("loaddata", str(dump))
    assert Source.objects.get(slug="product").signing_secret == secret


def test_each_save_encrypts_afresh(client):
    source, secret = source_make("product")
    before = stored(source)[0]
    source.save()
    assert stored(source)[0] != before  # a random IV each time: equal secrets are not recognisable


def test_after_a_key_rotation_the_old_key_still_decrypts_and_the_command_re_encrypts(client, settings):
    source, secret = source_make("product")
    old_ciphertext = stored(source)[0]

    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = "a-brand-new-key-" + "x" * 40, [settings.SECRET_KEY]
    assert Source.objects.get(id=source.id).signing_secret == secret
    out = io.StringIO()
    call_command("encrypt_secrets", stdout=out)
    assert "1 sources' secrets are encrypted under the current SECRET_KEY" in out.getvalue()
    assert stored(source)[0] != old_ciphertext

    settings.SECRET_KEY_FALLBACKS = []  # the old key retired: the new ciphertext still reads
    assert Source.objects.get(id=source.id).signing_secret == secret
    assert post_signed(client, source, secret, rating_event(id="evt_1"), msg_id="evt_1").status_code == 202


def test_a_secret_under_an_unknown_key_fails_with_a_clear_reason(settings):
    source, _ = source_make("product")
    settings.SECRET_KEY = "another-key-" + "y" * 40
    with pytest.raises(encryption.SecretUnreadable, match="put the old one in SECRET_KEY_FALLBACKS"):
        Source.objects.get(id=source.id)


def test_the_admin_shows_a_new_secret_once_and_never_again(admin_client):
    response = admin_client.post(
        "/admin/feedback/source/add/",
        {"name": "Partner", "slug": "partner", "kind": "product", "trust_weight": "1.0", "is_active": "on",
         "created_at_0": "2026-11-30", "created_at_1": "06:00:00", "scrub_patterns": ""},
        follow=True,
    )
    assert response.status_code == 200
    shown = re.findall(r"whsec_[A-Za-z0-9+/=]+", response.content.decode())
    assert len(shown) == 1
    source = Source.objects.get(slug="partner")
    assert source.signing_secret == shown[0]
    assert shown[0] not in stored(source)[0]

    page = admin_client.get(f"/admin/feedback/source/{source.id}/change/").content.decode()
    assert shown[0] not in page and "whsec_" not in page
    assert "stored encrypted and never shown again" in page


def test_the_admin_cannot_overwrite_a_secret(admin_client):
    source, secret = source_make("product")
    form = {"name": source.name, "slug": source.slug, "kind": source.kind, "trust_weight": "1.0", "is_active": "on",
            "created_at_0": "2026-11-30", "created_at_1": "06:00:00", "scrub_patterns": "",
            "signing_secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}
    response = admin_client.post(f"/admin/feedback/source/{source.id}/change/", form)
    assert response.status_code == 302
    source.refresh_from_db()
    assert source.signing_secret == secret


@pytest.mark.django_db(transaction=True)
def test_secrets_stored_before_encryption_are_encrypted_by_the_migration():
    executor = MigrationExecutor(connection)
    executor.migrate([("feedback", "0004_apitoken_scopes")])
    old_apps = executor.loader.project_state([("feedback", "0004_apitoken_scopes")]).apps
    plain = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    old = old_apps.get_model("feedback", "Source").objects.create(name="old", slug="old", signing_secret=plain)
    assert stored(old) == (plain, "")

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())

    assert stored(old)[0].startswith("enc1:")
    assert Source.objects.get(slug="old").signing_secret == plain
