from labeling.templatetags.audit import change_text


def test_a_change_reads_as_before_and_after():
    assert change_text({"before": "Old name", "after": "New name"}) == "Old name → New name"


def test_a_reference_reads_as_its_name_and_plain_values_as_themselves():
    assert change_text({"id": 4, "name": "Wrong file"}) == "Wrong file"
    assert change_text(3) == "3"
    assert change_text({"before": "", "after": "confirmed"}) == "– → confirmed"
