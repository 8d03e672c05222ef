"""feedback.scrubber's engine: the trigger scan, the result caches and the batch check change speed, never results.

The reference below applies every row of PATTERNS to the whole text, in table
order, with no triggers, no cache and a full re-scan on every pass: the plain
meaning of the table. The engine must give exactly its answers.
"""

import re
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from feedback import scrubber
from feedback.scrubber import PATTERNS, find_unscrubbed, find_unscrubbed_in, scrub
from tests import scrub_corpus as corpus

PLACEHOLDER = re.compile(r"\[(?:SECRET:[a-z0-9_]+|CUSTOM:[A-Za-z0-9_.-]+|EMAIL|PHONE|IP|PATH_HOME)\]")


def plain_matches(text, rows=PATTERNS):
    taken = [m.span() for m in PLACEHOLDER.finditer(text)]
    found = []
    for row in rows:
        for m in row.compiled.finditer(text):
            start, end = m.span(row.group)
            if start >= end or (row.check is not None and not row.check(m)):
                continue
            if any(s < end and start < e for s, e in taken):
                continue
            taken.append((start, end))
            found.append((start, end, row))
    return found


def plain_scrub(text, rows=PATTERNS):
    counts = Counter()
    for _ in range(5):
        found = sorted(plain_matches(text, rows), key=lambda hit: hit[0])
        if not found:
            break
        parts, position = [], 0
        for start, end, row in found:
            parts += [text[position:start], row.placeholder]
            counts[row.label] += 1
            position = end
        text = "".join(parts) + text[position:]
    return text, dict(counts)


def plain_unscrubbed(text):
    return sorted({row.name for _, _, row in plain_matches(text)})


# Characters that case-insensitive regexes and \d match though lower() keeps them apart from ASCII.
LOOK_ALIKES = ["ſ", "ı", "İ", "K", "٣", "١٠.٠.٣.١٧", "１２３", "߁"]
FRAGMENTS = sorted({value for item in corpus.PLANTED for value, _ in item.planted}) + [
    *(example.text for example in corpus.ROW_EXAMPLES.values()),
    *(row.placeholder for row in PATTERNS),
    *" ".join(corpus.CLEAN).split()[:300],
    *(trigger for row in PATTERNS for trigger in row.triggers),
    *":=@/\\\n \"'.-+()[]<>&?#,;0123456789",
    *("Password: ", "my password: ", "TOKEN=", "Api_Key = '", "call me at ", "C:\\Users\\", "Bearer "),
    *LOOK_ALIKES,
]
CASINGS = (str, str.upper, str.swapcase, str.title)


@st.composite
def mixed_text(draw):
    parts = draw(
        st.lists(
            st.one_of(
                st.sampled_from(FRAGMENTS).map(lambda f: f),
                st.tuples(st.sampled_from(FRAGMENTS), st.sampled_from(CASINGS)).map(lambda pair: pair[1](pair[0])),
                st.text(alphabet="aZ09:=@./\\-_+()[]<> \n\"'#%~$ſıİK٣", max_size=8),
            ),
            max_size=16,
        )
    )
    return "".join(parts)


@settings(max_examples=500, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(mixed_text())
def test_the_engine_gives_what_every_row_applied_plainly_gives(text):
    expected_text, expected_counts = plain_scrub(text)

    result = scrub(text)
    assert (result.text, result.counts) == (expected_text, expected_counts)
    assert find_unscrubbed(text) == plain_unscrubbed(text)
    # A second call answers from the cache: the same again.
    assert scrub(text).text == expected_text and find_unscrubbed(text) == plain_unscrubbed(text)


def test_the_engine_agrees_with_the_plain_rows_on_the_whole_corpus():
    texts = [item.text for item in corpus.PLANTED] + [e.text for e in corpus.ROW_EXAMPLES.values()] + corpus.CLEAN
    for text in texts:
        result = scrub(text)
        assert (result.text, result.counts) == plain_scrub(text), text
        assert find_unscrubbed(text) == plain_unscrubbed(text), text


def test_a_password_spelt_with_a_long_s_is_scrubbed():
    # (?i) matches ſ as s, but "paſſword".lower() holds no "pass": the row used to be skipped.
    assert scrub("my paſſword: hunter22 now").text == "my paſſword: [SECRET:password] now"
    assert find_unscrubbed("my paſſword: hunter22 now") == ["password_assignment"]


def test_an_address_written_in_arabic_indic_digits_is_scrubbed():
    # \d matches every decimal digit; the digit rows used to wait for an ASCII one.
    assert scrub("ssh ١٠.٠.٣.١٧ failed").text == "ssh [IP] failed"
    assert find_unscrubbed("ssh ١٠.٠.٣.١٧ failed") == ["ipv4"]


def test_a_text_longer_than_the_cache_limit_is_scrubbed_the_same_way():
    item = next(item for item in corpus.PLANTED if item.planted)
    text = (item.text + "\n") * (scrubber._CACHED_TEXT_LIMIT // len(item.text) + 2)
    assert len(text) > scrubber._CACHED_TEXT_LIMIT

    result = scrub(text)
    assert (result.text, result.counts) == plain_scrub(text)
    assert find_unscrubbed(text) == plain_unscrubbed(text) != []
    assert find_unscrubbed(result.text) == []


def test_changing_a_returned_result_leaves_the_cached_one_intact():
    text = "mail alice@example.com from 10.0.3.17"
    first = scrub(text)
    first.counts.clear()
    names = find_unscrubbed(text)
    names.append("changed")

    assert scrub(text).counts == {"EMAIL": 1, "IP": 1}
    assert find_unscrubbed(text) == ["email", "ipv4"]


def test_custom_patterns_are_cached_apart_from_the_built_in_rows():
    text = "ssh db1.corp.acme.net"
    extra = [("hostname", r"\b[a-z0-9-]+\.corp\.acme\.net\b")]

    assert scrub(text).text == text
    assert scrub(text, extra_patterns=extra).text == "ssh [CUSTOM:hostname]"
    assert scrub(text).text == text
    assert find_unscrubbed(text) == []
    assert find_unscrubbed(text, extra_patterns=extra) == ["custom:hostname"]


def test_find_unscrubbed_in_names_every_row_found_in_any_text():
    texts = ["user", "assistant", "key AKIA4HKQ2Z7XNB3LPQWE", "user", "mail jane@acme-corp.com", ""]

    assert find_unscrubbed_in(texts) == ["aws_access_key", "email"]
    assert find_unscrubbed_in(iter(["user", "[EMAIL] at [IP]"])) == []
    assert find_unscrubbed_in(["ssh db1.corp.acme.net"], extra_patterns=[("host", r"db\d\.corp")]) == ["custom:host"]


def test_find_unscrubbed_in_refuses_a_text_that_is_not_a_string():
    try:
        find_unscrubbed_in(["fine", 42])
    except TypeError as exc:
        assert "int" in str(exc)
    else:
        raise AssertionError("a number was accepted as a text")
