"""manage.py source_create, secret rotation, token storage."""

import io

import pytest
from django.core.management import CommandError, call_command

from feedback.models import ApiToken, Source
from feedback.services import token_hash
from feedback.signatures import secret_key

pytestmark = pytest.mark.django_db


def run(*args) -> dict[str, str]:
    out = io.StringIO()
    call_command("source_create", *args, stdout=out)
    return dict(line.split(": ", 1) for line in out.getvalue().splitlines())


def test_it_prints_a_new_secret_and_token_once_and_stores_only_the_token_hash():
    printed = run("Coder Backend")
    source = Source.objects.get(slug="coder-backend")
    assert printed["webhook"] == "/api/v1/sources/coder-backend/events"
    assert printed["secret"].startswith("whsec_") and len(secret_key(printed["secret"])) == 32
    assert source.signing_secret == printed["secret"]
    token = ApiToken.objects.get(source=source)
    assert token.token_hash == token_hash(printed["token"])
    assert not ApiToken.objects.filter(token_hash=printed["token"]).exists()


def test_it_takes_a_given_secret():
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    assert run("partner", "--secret", secret)["secret"] == secret


@pytest.mark.parametrize("bad", ["nope", "whsec_!!!", "whsec_c2hvcnQ="])
def test_it_refuses_a_malformed_secret(bad):
    with pytest.raises(CommandError, match="signing secret"):
        run("partner", "--secret", bad)
    assert not Source.objects.exists()


def test_it_refuses_a_second_source_with_the_same_name():
    run("partner")
    with pytest.raises(CommandError, match="exists already"):
        run("partner")
    assert Source.objects.count() == 1
