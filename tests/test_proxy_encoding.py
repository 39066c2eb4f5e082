"""The proxy's fast readers and writers (msgspec) against the slow ones they stand in for: the
log line is the record pydantic would write, a reply is what json.loads reads, and the surrogate
check's substring test lets through nothing its pattern would catch."""

from __future__ import annotations

import json
import math
import time

from hypothesis import given, settings, strategies as st

from pytest_webbench.gateway.meter import ModelCall
from pytest_webbench.proxy.framing import _SURROGATE, unsendable
from pytest_webbench.proxy.log import CallRecord, bounded, record_line
from pytest_webbench.proxy.upstream import read_reply
from pytest_webbench.results.well_formed import well_formed

# JSON values as the proxy meets them: any text (lone surrogates too), ints past 64 bits, floats
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2 ** 80), max_value=2 ** 80)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def same(a, b) -> bool:
    """Equal as JSON values (NaN equal to itself, 1 and 1.0 and True told apart)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


@settings(max_examples=300, deadline=None)
@given(arguments=json_values, detail=st.none() | st.text(), latency=st.floats(min_value=0, max_value=1e9),
       saw=st.none() | st.lists(st.text(max_size=5), max_size=3))
def test_a_log_line_is_the_line_pydantic_writes(arguments, detail, latency, saw):
    record = CallRecord(time=time.time(), trial="t-a1-control", seq=3, method="tools/call", tool="execute_playwright_code",
                        arguments=arguments, decision="forwarded", outcome="ok", detail=detail, latency_ms=latency,
                        webmcp={"action": "list", "tools": 2}, result="1", saw=saw)
    line = record_line(record)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    try:
        expected = json.loads(record.model_dump_json())
    except Exception:  # a lone surrogate: pydantic cannot write it either; both paths make it well-formed
        assert CallRecord.model_validate_json(line).seq == 3
        return
    assert same(json.loads(line), expected)
    assert CallRecord.model_validate_json(line) == CallRecord.model_validate_json(record.model_dump_json())


def test_a_gateway_line_is_the_line_pydantic_writes():
    call = ModelCall(time=1.5, trial="t", seq=1, api="messages", path="/v1/messages", status=200, decision="forwarded",
                     input_tokens=12, cost_usd=0.25, tool_calls=[{"name": "bash", "arguments": "{}"}], reply_text="done \u00e9")
    assert json.loads(record_line(call)) == json.loads(call.model_dump_json())


@settings(max_examples=300, deadline=None)
@given(value=json_values, ascii_only=st.booleans())
def test_a_reply_is_read_as_json_loads_reads_it(value, ascii_only):
    try:
        line = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate can only be sent escaped
        line = json.dumps(value).encode()
    assert same(read_reply(line), json.loads(line))


def test_what_msgspec_refuses_and_json_reads_is_read_as_json_reads_it():
    for line in (b'{"text":"cut \\ud83d"}', b'{"x":NaN}', b'{"x":-Infinity}', b'{"n":1e400}', b'[1,2]',
                 '{"a":"\u00e9"}'.encode("utf-16"), b'{"a":1,"a":2}', b'{"big":123456789012345678901234567890}'):
        assert same(read_reply(line), json.loads(line)), line
    for garbage in (b"Listening on port 9", b'{"a":1} trailing', b"\xff\xfe\x00"):
        try:
            json.loads(garbage)
        except ValueError:
            pass
        else:
            raise AssertionError(f"json reads {garbage!r}")
        try:
            read_reply(garbage)
        except ValueError:
            continue
        raise AssertionError(f"read_reply took {garbage!r}, which json refuses")


def test_arguments_are_bounded_by_their_compact_size_and_truncated_past_it():
    assert bounded({"code": "x" * 3900}) == {"code": "x" * 3900}
    big = bounded({"code": "x" * 5000})
    assert big["truncated"] is True and big["chars"] > 5000 and len(big["head"]) == 4000
    lone = bounded({"code": "\ud800" * 10})  # msgspec refuses it: json's path decides
    assert lone == {"code": "\ud800" * 10}
    assert bounded({"code": "\ud800" * 2000})["truncated"] is True


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from([b"\\", b"\\\\", b"\\u", b"\\ud8", b"\\uD8", b"\\uDBFF", b"\\udc00", b"\\u00e9", b"00",
                                  b"\xed\xa0\x80", b"\xc3\xa9", b"a", b"d", b"8"]), max_size=8))
def test_the_surrogate_check_s_substring_test_misses_nothing_its_pattern_finds(parts):
    text = b'{"code":"' + b"".join(parts) + b'"}'
    try:
        message = json.loads(text)
    except ValueError:
        return
    by_pattern_alone = _SURROGATE.search(text) is not None and well_formed(message) is not message
    assert ("surrogate" in (unsendable(text, message) or "")) == by_pattern_alone
