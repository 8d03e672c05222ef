"""In a real browser: a flagged rollout's item page marks the flagged call in the transcript, names the check
and the call, and confirming the flag there tags the reviewer's label."""

import pytest

from labeling.models import Label
from rollouts import services
from rollouts.models import RolloutFlag
from tests.browser.conftest import log_in
from tests.factories import source_make
from tests.factories.rollouts import GIT_LOG, READ_TEST, rollout_make

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_flagged_call_is_marked_and_confirming_the_flag_tags_the_label(page, reviewer_user):
    source = source_make("agent-backend")[0]
    # Reading the test file is a near miss: only the second call, `git log`, is flagged.
    item = rollout_make(source, [READ_TEST, GIT_LOG])
    services.items_check(item_ids=[item.id])
    flag = RolloutFlag.objects.get(item=item)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("response", lambda response: errors.append(f"{response.status} {response.url}") if response.status >= 400 else None)

    log_in(page, "rita", "rita-password-123")
    page.goto(f"/items/{item.id}/")

    # The flags panel loads after the page; the flagged call is then marked in the transcript.
    listed = page.locator(f"#rollout-flags li#flag-{flag.id}")
    listed.wait_for()
    page.wait_for_selector("details.tool-call.tool-call-flagged")
    marked = page.locator("details.tool-call.tool-call-flagged")
    assert marked.count() == 1
    assert marked.locator("#call-tool_calls-1").count() == 1
    assert marked.evaluate("call => call.open") is True
    assert marked.locator(".flag-badge").inner_text() == "\u2691 Reads version-control history"
    assert "git log -p -- src/parse.py" in marked.inner_text()
    clean = page.locator("details.tool-call:not(.tool-call-flagged)")
    assert clean.count() == 1 and clean.locator("#call-tool_calls-0").count() == 1

    # The flag names its check and its call, and links to the call.
    text = listed.inner_text()
    assert "Reads version-control history" in text and "Pending" in text
    call_link = listed.locator("a[href='#call-tool_calls-1']")
    assert call_link.inner_text() == "call 2 · shell"
    call_link.click()
    page.wait_for_function("() => location.hash === '#call-tool_calls-1'")

    listed.locator("button[value=confirm]").click()
    page.wait_for_selector(".flash-success")
    assert page.locator(".flash-success").inner_text() == (
        f"Confirmed “Reads version-control history” on #{item.id}; "
        f"your label on #{item.id} is tagged “read the answer from history”."
    )
    page.locator(f"#rollout-flags li#flag-{flag.id}[data-status=confirmed]").wait_for()
    assert "Confirmed by rita" in page.locator(f"#flag-{flag.id}").inner_text()
    # The label form shows the tag set, and the call stays marked.
    assert page.locator("input[name=tags][value='read the answer from history']").is_checked()
    page.locator("details.tool-call.tool-call-flagged #call-tool_calls-1").wait_for(state="attached")
    label = Label.objects.get(item=item, reviewer=reviewer_user)
    assert "read the answer from history" in label.tags and label.verdict == Label.Verdict.FAILURE
    assert errors == []
