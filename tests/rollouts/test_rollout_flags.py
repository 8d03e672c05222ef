"""Flags stored per item from the pipeline, shown scrubbed, decided (audited, tagged), searched and queued."""

import json

import pytest
from django.core.management import call_command

from feedback.models import FeedbackItem
from labeling.models import AuditEvent, Label
from rollouts import services
from rollouts.checks import CHECKS_VERSION
from rollouts.models import (
    CheckedRollout,
    CustomCheck,
    RolloutFlag,
    SourceRolloutSettings,
)
from tests.factories import client_for, source_make, user_make
from tests.factories.rollouts import GIT_LOG, READ_TEST, rollout_make
from tests.factories.people import admin, reviewer  # noqa: F401 (fixtures: users, not clients)

pytestmark = pytest.mark.django_db

SECRET_VALUE = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


CAT_ENV = {"name": "shell", "arguments": {"command": "cat .env"}, "result": f"GITHUB_TOKEN={SECRET_VALUE}"}


@pytest.fixture
def source():
    return source_make("agent-backend")[0]


def test_the_embedding_task_runs_the_checks_on_the_same_batch(source, settings):
    import rollouts.tasks  # noqa: F401  (a worker finds it by autodiscovery; the test process must import it)
    from config.celery import app as celery_app
    from feedback import tasks

    # Embedding is not what is under test here: a batch whose items are already embedded embeds nothing.
    item = rollout_make(source, [READ_TEST, GIT_LOG])
    celery_app.conf.task_always_eager = True
    try:
        tasks.embed_items.apply(args=[[item.id]])
    finally:
        celery_app.conf.task_always_eager = False
    flag = RolloutFlag.objects.get(item=item)
    assert (flag.check_name, flag.location, flag.call_index, flag.tool_name) == ("vcs_history", "tool_calls.1", 1, "shell")
    assert CheckedRollout.objects.get(item=item).calls == 2


def test_checking_twice_adds_nothing_and_keeps_decisions(source, reviewer):
    item = rollout_make(source, [GIT_LOG])
    assert services.items_check(item_ids=[item.id]).flags_added == 1
    assert services.items_check(item_ids=[item.id]).checked == 0  # already checked under these checks
    flag = RolloutFlag.objects.get(item=item)
    services.flag_decide(flag_id=flag.id, reviewer=reviewer, decision="dismissed")
    outcome = services.items_check(item_ids=[item.id], force=True)
    assert (outcome.checked, outcome.flags_added, outcome.flags_removed) == (1, 0, 0)
    assert RolloutFlag.objects.get(item=item).status == "dismissed"


def test_a_pending_flag_the_checks_no_longer_raise_is_dropped(source):
    item = rollout_make(source, [GIT_LOG])
    services.items_check(item_ids=[item.id])
    FeedbackItem.objects.filter(id=item.id).update(raw_payload={"context": {"tool_calls": [READ_TEST]}})
    outcome = services.items_check(item_ids=[item.id], force=True)
    assert outcome.flags_removed == 1 and not RolloutFlag.objects.filter(item=item).exists()


def test_a_secret_the_check_matched_is_never_stored_or_shown(source, reviewer):
    item = rollout_make(source, [CAT_ENV])
    services.items_check(item_ids=[item.id])
    flag = RolloutFlag.objects.get(item=item)
    assert flag.check_name == "secrets"
    stored = json.dumps(list(RolloutFlag.objects.filter(item=item).values()), default=str)
    assert SECRET_VALUE not in stored
    client = client_for(reviewer)
    page = client.get(f"/items/{item.id}/")
    assert page.status_code == 200 and SECRET_VALUE not in page.content.decode()
    panel = client.get(f"/rollouts/items/{item.id}/flags").content.decode()
    assert "Touches secrets or credentials" in panel and SECRET_VALUE not in panel
    assert '"result"' not in flag.shown_call  # a credentials file's content is the credential


def test_a_custom_pattern_match_is_masked_in_the_shown_call(source, admin):
    item = rollout_make(source, [{"name": "deploy", "arguments": {"target": "prod", "key": "zq-internal-77aa"}}])
    services.items_check(item_ids=[item.id])
    services.custom_check_create(
        source=source, name="internal-key", explanation="Used an internal deploy key.", arguments_pattern=r"zq-internal-\w+"
    )
    services.items_check(item_ids=[item.id], force=True)
    flag = RolloutFlag.objects.get(item=item, check_name="custom:internal-key")
    assert "zq-internal-77aa" not in flag.shown_call and "[MATCHED:internal-key]" in flag.shown_call
    assert flag.custom_check.name == "internal-key"


def test_the_item_page_loads_the_flags_and_anchors_each_call(source, reviewer):
    item = rollout_make(source, [READ_TEST, GIT_LOG])
    services.items_check(item_ids=[item.id])
    client = client_for(reviewer)
    page = client.get(f"/items/{item.id}/", {"queue": "flag:vcs_history"}).content.decode()
    # The panel comes after the page (htmx), so the page reads no more than before.
    assert f'hx-get="/rollouts/items/{item.id}/flags?queue=flag%3Avcs_history"' in page
    assert 'id="call-tool_calls-0"' in page and 'id="call-tool_calls-1"' in page
    assert "js/rollout_flags.js" in page
    panel = client.get(f"/rollouts/items/{item.id}/flags", {"queue": "flag:vcs_history"})
    html = panel.content.decode()
    assert panel.status_code == 200
    assert 'data-location="tool_calls.1"' in html and 'data-anchor="call-tool_calls-1"' in html
    assert 'href="#call-tool_calls-1"' in html and "Reads version-control history" in html
    assert "git log -p -- src/parse.py" in html  # the evidence and the scrubbed call
    assert 'value="/items/%d/?queue=flag%%3Avcs_history"' % item.id in html
    assert "tool_calls.0" not in html  # the test file read is a near miss


def test_the_flags_panel_of_a_clean_or_missing_item(source, reviewer):
    item = rollout_make(source, [READ_TEST])
    services.items_check(item_ids=[item.id])
    client = client_for(reviewer)
    assert "No rollout check flagged" in client.get(f"/rollouts/items/{item.id}/flags").content.decode()
    assert client.get("/rollouts/items/999999/flags").status_code == 404
    assert client_for(user_make("olga")).get(f"/rollouts/items/{item.id}/flags").status_code == 403


def test_confirming_a_flag_is_audited_and_tags_the_reviewers_label(source, reviewer):
    item = rollout_make(source, [GIT_LOG])
    services.items_check(item_ids=[item.id])
    flag = RolloutFlag.objects.get(item=item)
    client = client_for(reviewer)
    response = client.post(f"/rollouts/flags/{flag.id}/decide", {"decision": "confirm", "next": f"/items/{item.id}/"})
    assert response.status_code == 302 and response["Location"] == f"/items/{item.id}/"
    flag.refresh_from_db()
    assert (flag.status, flag.decided_by) == ("confirmed", reviewer)
    label = Label.objects.get(item=item, reviewer=reviewer)
    assert label.verdict == "failure" and label.tags == ["read the answer from history"]
    event = AuditEvent.objects.get(item=item, action="confirmed rollout flag")
    assert event.actor == reviewer and event.details == {
        "check": "vcs_history", "call": "tool_calls.0", "status": ["pending", "confirmed"]
    }

    response = client.post(f"/rollouts/flags/{flag.id}/decide", {"decision": "dismiss"})
    assert response.status_code == 302
    flag.refresh_from_db()
    assert flag.status == "dismissed"
    assert AuditEvent.objects.filter(item=item, action="dismissed rollout flag").count() == 1
    label.refresh_from_db()
    assert label.tags == [] and label.verdict == "failure"  # the tag goes; the reviewer's verdict stays


def test_confirming_keeps_the_rest_of_an_existing_label(source, reviewer):
    item = rollout_make(source, [{"name": "edit_file", "arguments": {"path": "tests/test_a.py", "change": "skip"}}])
    Label.objects.create(item=item, reviewer=reviewer, verdict="failure", tags=["wrong file"], hint="Fix the code.")
    services.items_check(item_ids=[item.id])
    services.flag_decide(flag_id=RolloutFlag.objects.get(item=item).id, reviewer=reviewer, decision="confirmed")
    label = Label.objects.get(item=item, reviewer=reviewer)
    assert label.tags == ["wrong file", "disabled or skipped tests"] and label.hint == "Fix the code."


def test_a_risky_action_has_no_reward_hacking_tag(source, reviewer):
    item = rollout_make(source, [{"name": "shell", "arguments": {"command": "rm -rf /srv/app"}}])
    services.items_check(item_ids=[item.id])
    services.flag_decide(flag_id=RolloutFlag.objects.get(item=item).id, reviewer=reviewer, decision="confirmed")
    assert not Label.objects.filter(item=item).exists()
    assert AuditEvent.objects.filter(item=item, action="confirmed rollout flag").exists()


def test_deciding_refuses_odd_input_and_needs_the_reviewer_role(source, reviewer):
    item = rollout_make(source, [GIT_LOG])
    services.items_check(item_ids=[item.id])
    flag = RolloutFlag.objects.get(item=item)
    client = client_for(reviewer)
    response = client.post(f"/rollouts/flags/{flag.id}/decide", {"decision": "maybe"}, follow=True)
    assert "Choose confirm or dismiss." in response.content.decode()
    response = client.post("/rollouts/flags/999999/decide", {"decision": "confirm"}, follow=True)
    assert "that flag no longer exists" in response.content.decode()
    assert client.get(f"/rollouts/flags/{flag.id}/decide").status_code == 405
    outsider = client_for(user_make("olga"))
    assert outsider.post(f"/rollouts/flags/{flag.id}/decide", {"decision": "confirm"}).status_code == 403
    # An open redirect is not followed.
    response = client.post(f"/rollouts/flags/{flag.id}/decide", {"decision": "confirm", "next": "https://evil.test/"})
    assert response["Location"] == "/rollouts/"
    # Confirming twice changes nothing and records one event.
    client.post(f"/rollouts/flags/{flag.id}/decide", {"decision": "confirm"})
    assert AuditEvent.objects.filter(item=item, action="confirmed rollout flag").count() == 1
    assert RolloutFlag.objects.get(id=flag.id).status == "confirmed"


def test_search_filters_by_flag_and_refuses_an_unknown_check(source, reviewer):
    flagged = rollout_make(source, [GIT_LOG])
    clean = rollout_make(source, [READ_TEST])
    dismissed = rollout_make(source, [GIT_LOG])
    services.items_check(item_ids=[flagged.id, clean.id, dismissed.id])
    services.flag_decide(flag_id=RolloutFlag.objects.get(item=dismissed).id, reviewer=reviewer, decision="dismissed")
    client = client_for(reviewer)
    html = client.get("/search/", {"flag": "vcs_history"}).content.decode()
    assert f"#{flagged.id}" in html or f"/items/{flagged.id}/" in html
    assert f"/items/{clean.id}/" not in html and f"/items/{dismissed.id}/" not in html
    html = client.get("/search/", {"flag": "any"}).content.decode()
    assert f"/items/{flagged.id}/" in html and f"/items/{clean.id}/" not in html
    response = client.get("/search/", {"flag": "no_such_check"})
    assert response.status_code == 422 and "Pick a rollout check from the list." in response.content.decode()
    response = client.get("/search/", {"flag": "x" * 61})
    assert response.status_code == 422


def test_the_flag_queue_hands_out_pending_items_until_decided(source, reviewer):
    first = rollout_make(source, [GIT_LOG])
    second = rollout_make(source, [GIT_LOG])
    rollout_make(source, [READ_TEST])
    services.items_check(item_ids=list(FeedbackItem.objects.values_list("id", flat=True)))
    client = client_for(reviewer)
    response = client.get("/review/next", {"category": "flag:vcs_history"})
    assert response.status_code == 302
    handed = int(response["Location"].split("/items/")[1].split("/")[0])
    assert handed in (first.id, second.id)
    page = client.get(response["Location"]).content.decode()
    assert "Flagged: Reads version-control history" in page
    for item in (first, second):
        services.flag_decide(flag_id=RolloutFlag.objects.get(item=item).id, reviewer=reviewer, decision="dismissed")
    response = client.get("/review/next", {"category": "flag:vcs_history"}, follow=True)
    assert "Nothing left in “Flagged: Reads version-control history”" in response.content.decode()
    response = client.get("/review/next", {"category": "flag:nonsense"}, follow=True)
    assert "Pick a queue" in response.content.decode()


def test_the_checks_page_lists_counts_and_rates(source, reviewer):
    rollout_make(source, [GIT_LOG], version="2.2")
    rollout_make(source, [READ_TEST], version="2.2")
    services.items_check(item_ids=list(FeedbackItem.objects.values_list("id", flat=True)))
    html = client_for(reviewer).get("/rollouts/").content.decode()
    assert "Reads version-control history" in html and "50.0%" in html
    assert "/review/next?category=flag:vcs_history" in html
    overview = client_for(reviewer).get("/").content.decode()
    assert 'hx-get="/rollouts/rates"' in overview
    rates = client_for(reviewer).get("/rollouts/rates").content.decode()
    assert 'id="overview-flag-rates"' in rates and "50.0%" in rates
    assert "/search/?flag=vcs_history&amp;model_version=2.2" in rates


def test_the_backfill_command_checks_existing_items_once(source, capsys):
    rollout_make(source, [GIT_LOG])
    rollout_make(source, [READ_TEST])
    call_command("rollouts_check")
    assert "2 items checked, 1 flags added" in capsys.readouterr().out
    call_command("rollouts_check")
    assert "0 items checked" in capsys.readouterr().out
    assert CheckedRollout.objects.filter(checks_version=CHECKS_VERSION).count() == 2
    call_command("rollouts_check", "--all")
    assert "2 items checked, 0 flags added" in capsys.readouterr().out


# --- Admin settings: allow-list and custom checks ----------------------------------------


def test_a_custom_check_that_does_not_compile_is_refused_with_the_reason(source, admin):
    rollout_make(source, [GIT_LOG])
    services.items_check(item_ids=list(FeedbackItem.objects.values_list("id", flat=True)))
    client = client_for(admin)
    form = {"action": "add_check", "name": "deploys", "explanation": "Deploys.", "tool_pattern": "deploy(", "sample": ""}
    response = client.post(f"/rollouts/sources/{source.slug}/", form)
    assert response.status_code == 422
    assert "the tool name pattern does not compile: missing ), unterminated subpattern" in response.content.decode()
    assert not CustomCheck.objects.exists()


@pytest.mark.parametrize(
    "fields,message",
    [
        ({"arguments_pattern": "kubectl"}, "the check matches nothing in the last 1 tool calls of agent-backend"),
        ({"arguments_pattern": "a*"}, "matches the empty string"),
        ({"name": "vcs_history", "arguments_pattern": "git"}, "is a built-in check"),
        ({"name": "Bad Name!", "arguments_pattern": "git"}, "1-50 lowercase letters"),
        ({"explanation": "", "arguments_pattern": "git"}, "give a one-line explanation"),
        ({}, "give a tool name pattern, an arguments pattern, or both"),
        ({"arguments_pattern": "git", "sample": "{not json"}, "the sample is not JSON"),
        ({"arguments_pattern": "git", "sample": "[]"}, "the sample holds no tool call"),
        ({"arguments_pattern": "kubectl", "sample": '{"name": "shell", "arguments": {"command": "ls"}}'},
         "the check matches nothing in the sample"),
        ({"arguments_pattern": "x" * 1001}, "a pattern is too long"),
    ],
)
def test_a_custom_check_is_refused_with_its_reason(source, fields, message):
    rollout_make(source, [GIT_LOG])
    services.items_check(item_ids=list(FeedbackItem.objects.values_list("id", flat=True)))
    values = {"name": "mine", "explanation": "Something a reviewer reads."} | fields
    with pytest.raises(services.CheckRefused, match=message.replace("(", r"\(")):
        services.custom_check_create(source=source, **values)
    assert not CustomCheck.objects.exists()


def test_a_custom_check_on_a_source_without_rollouts_needs_a_sample(source):
    with pytest.raises(services.CheckRefused, match="no rollouts to try the check on yet"):
        services.custom_check_create(source=source, name="k", explanation="Runs kubectl.", arguments_pattern="kubectl")
    check, matched = services.custom_check_create(
        source=source, name="k", explanation="Runs kubectl.", arguments_pattern="kubectl",
        sample='{"name": "shell", "arguments": {"command": "kubectl delete pod x"}}',
    )
    assert matched == 1 and check.check_name == "custom:k"
    with pytest.raises(services.CheckRefused, match="has a check named 'k' already"):
        services.custom_check_create(source=source, name="k", explanation="Again.", arguments_pattern="kubectl",
                                     sample='{"name": "shell", "arguments": {"command": "kubectl"}}')


def test_an_admin_adds_a_custom_check_and_new_rollouts_are_flagged_by_it(source, admin):
    rollout_make(source, [{"name": "shell", "arguments": {"command": "kubectl delete ns prod"}}])
    services.items_check(item_ids=list(FeedbackItem.objects.values_list("id", flat=True)))
    client = client_for(admin)
    form = {"action": "add_check", "name": "kubectl-delete", "explanation": "Deletes cluster resources.",
            "tool_pattern": "shell", "arguments_pattern": r"kubectl\s+delete", "sample": ""}
    response = client.post(f"/rollouts/sources/{source.slug}/", form, follow=True)
    assert response.status_code == 200 and "it matched 1 sample call." in response.content.decode()
    later = rollout_make(source, [{"name": "shell", "arguments": {"command": "kubectl delete pod web-1"}}])
    services.items_check(item_ids=[later.id])
    assert RolloutFlag.objects.filter(item=later, check_name="custom:kubectl-delete").exists()


def test_the_allow_list_is_set_per_source_and_checked(source, admin, reviewer):
    client = client_for(admin)
    url = f"/rollouts/sources/{source.slug}/"
    response = client.post(url, {"action": "hosts", "allowed_hosts": "https://pypi.org/simple"})
    assert response.status_code == 422 and "give a host name such as pypi.org, not a URL" in response.content.decode()
    response = client.post(url, {"action": "hosts", "allowed_hosts": "pypi.org\nbad_host!"})
    assert response.status_code == 422 and "is not a host name" in response.content.decode()
    assert not SourceRolloutSettings.objects.exists()
    response = client.post(url, {"action": "hosts", "allowed_hosts": "PyPI.org, github.com\npypi.org"})
    assert response.status_code == 302
    assert SourceRolloutSettings.objects.get(source=source).allowed_hosts == ["pypi.org", "github.com"]
    item = rollout_make(source, [{"name": "shell", "arguments": {"command": "pip install requests"}}])
    services.items_check(item_ids=[item.id])
    assert not RolloutFlag.objects.filter(item=item).exists()
    # Only admins set it; an unknown source is a 404.
    assert client_for(reviewer).get(url).status_code == 403
    assert client.get("/rollouts/sources/no-such-source/").status_code == 404
    assert client.post(url, {"action": "explode"}).status_code == 422
