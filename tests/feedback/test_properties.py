"""Property tests: the signature verifier and the event parser, on generated input."""

import json
import string

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from feedback.services import events_ingest
from feedback.signatures import SignatureError, secret_generate, sign, verify

SECRET = secret_generate()
OTHER_SECRET = secret_generate()
NOW = 1_800_000_000
ids = st.text(alphabet=string.ascii_letters + string.digits + "_-", min_size=1, max_size=40)
bodies = st.binary(max_size=2000)


def check(*, msg_id, timestamp, body, header, secrets=(SECRET,)):
    verify(secrets_to_try=secrets, msg_id=msg_id, timestamp=str(timestamp), signature_header=header,
           body=body, now=NOW, tolerance_seconds=300)


@given(msg_id=ids, body=bodies, offset=st.integers(-300, 300))
def test_a_correct_signature_within_the_tolerance_is_accepted(msg_id, body, offset):
    timestamp = NOW + offset
    check(msg_id=msg_id, timestamp=timestamp, body=body, header=sign(secret=SECRET, msg_id=msg_id, timestamp=timestamp, body=body))


@given(msg_id=ids, other_id=ids, body=bodies, other_body=bodies, delta=st.integers(1, 299))
def test_any_change_to_id_timestamp_or_body_is_rejected(msg_id, other_id, body, other_body, delta):
    header = sign(secret=SECRET, msg_id=msg_id, timestamp=NOW, body=body)
    if other_id != msg_id:
        with pytest.raises(SignatureError):
            check(msg_id=other_id, timestamp=NOW, body=body, header=header)
    if other_body != body:
        with pytest.raises(SignatureError):
            check(msg_id=msg_id, timestamp=NOW, body=other_body, header=header)
    with pytest.raises(SignatureError):
        check(msg_id=msg_id, timestamp=NOW + delta, body=body, header=header)


@given(msg_id=ids, body=bodies, use_old=st.booleans())
def test_during_rotation_either_secret_is_accepted_and_a_stranger_is_not(msg_id, body, use_old):
    signing_secret = OTHER_SECRET if use_old else SECRET
    header = sign(secret=signing_secret, msg_id=msg_id, timestamp=NOW, body=body)
    check(msg_id=msg_id, timestamp=NOW, body=body, header=header, secrets=(SECRET, OTHER_SECRET))
    with pytest.raises(SignatureError):
        check(msg_id=msg_id, timestamp=NOW, body=body, header=header, secrets=(secret_generate(),))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)
event_like = st.fixed_dictionaries(
    {},
    optional={
        "id": json_values | ids,
        "type": json_values | st.just("feedback.rating"),
        "occurred_at": json_values | st.just("2026-11-30T10:00:00Z"),
        "rating": json_values | st.sampled_from(["up", "down"]),
        "comment": json_values,
        "model": json_values,
        "context": json_values,
    },
)


@pytest.mark.django_db
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=st.lists(event_like | json_values, max_size=5))
def test_any_json_either_parses_or_is_rejected_with_a_field_path(events):
    from feedback.models import Source

    source = Source.objects.get_or_create(slug="prop", defaults={"name": "prop", "signing_secret": SECRET})[0]
    json.dumps(events)  # generated values are plain JSON
    result = events_ingest(source=source, events=events)
    assert len(result.outcomes) == len(events)
    for outcome in result.outcomes:
        assert outcome.status in ("accepted", "duplicate", "invalid")
        if outcome.status == "invalid":
            assert outcome.error and outcome.field and outcome.field.startswith(f"events[{outcome.index}]")
