"""The proxy's fast readers and writers (msgspec) against the slow ones they stand in for: the
log line is the record pydantic would write, a request or a reply is what json.loads reads, a
message written is what json.dumps writes, and the surrogate check's substring test lets through
nothing its pattern would catch."""

from __future__ import annotations

import json
import math
import time

from hypothesis import given, settings, strategies as st

from pytest_webbench.gateway.meter import ModelCall
from pytest_webbench.proxy.framing import _SURROGATE, message_bytes, read_reply, read_request, unsendable
from pytest_webbench.proxy.log import CallLine, CallRecord, bounded, call_line, record_line
from pytest_webbench.proxy.upstream import _call_key
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
    # the proxy's own path, from the fields without the model, writes the same bytes
    fields = {name: getattr(record, name) for name in record.model_fields_set}
    assert call_line(**fields) == line
    try:
        expected = json.loads(record.model_dump_json())
    except Exception:  # a lone surrogate: pydantic cannot write it either; both paths make it well-formed
        assert CallRecord.model_validate_json(line).seq == 3
        return
    assert same(json.loads(line), expected)
    assert CallRecord.model_validate_json(line) == CallRecord.model_validate_json(record.model_dump_json())


def test_the_proxy_s_unvalidated_record_has_the_model_s_fields_and_defaults():
    assert CallLine.__struct_fields__ == tuple(CallRecord.model_fields)
    defaults = dict(zip(CallLine.__struct_fields__[-len(CallLine.__struct_defaults__):], CallLine.__struct_defaults__))
    required = {name for name, field in CallRecord.model_fields.items() if field.is_required()}
    assert set(CallLine.__struct_fields__) - set(defaults) - {"decision"} <= required  # kw_only: defaults may come early
    for name, field in CallRecord.model_fields.items():
        if name not in required:
            struct_default = getattr(CallLine(time=0, trial="", seq=0, method="", decision=""), name)
            assert struct_default == field.default, name


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


@settings(max_examples=300, deadline=None)
@given(value=json_values, ascii_only=st.booleans())
def test_a_request_is_read_as_json_loads_reads_it_as_utf8(value, ascii_only):
    try:
        line = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8")
    except UnicodeEncodeError:
        line = json.dumps(value).encode()
    assert same(read_request(line), json.loads(line.decode("utf-8")))
    assert same(read_request(line.decode("utf-8")), json.loads(line))


def test_a_request_msgspec_refuses_is_read_or_refused_as_json_does_it():
    for line in (b'{"text":"cut \\ud83d"}', b'{"x":NaN}', b'{"n":1e400}', b'{"a":1,"a":2}', b"[" * 3000 + b"]" * 3000):
        try:
            expected = json.loads(line.decode("utf-8"))
        except RecursionError:
            try:
                read_request(line)
            except RecursionError:
                continue
            raise AssertionError("json's depth is not the limit")
        assert same(read_request(line), expected), line
    for refused in ('{"a":"\u00e9"}'.encode("utf-16"), b'{"a":"\xff"}', b"\xef\xbb\xbf{}", b'{"a":1} trailing'):
        try:
            read_request(refused)
        except ValueError:  # UnicodeDecodeError among them: MCP's JSON is UTF-8
            continue
        raise AssertionError(f"read_request took {refused!r}")


@settings(max_examples=300, deadline=None)
@given(value=json_values | st.dictionaries(st.text(max_size=4), st.floats() | st.text(), max_size=3))
def test_a_message_is_written_on_one_line_as_the_value_json_writes(value):
    data = message_bytes(value)
    assert b"\n" not in data and b"\r" not in data
    assert same(json.loads(data), json.loads(json.dumps(value)))  # NaN, infinities and lone surrogates too


def test_a_reply_s_id_matches_only_a_request_id_of_its_own_type_and_value():
    assert _call_key(1) == _call_key(1) and _call_key("a") == _call_key("a")
    assert _call_key(1) != _call_key("1")
    assert _call_key(True) is None and _call_key(1.0) is None and _call_key([1]) is None and _call_key(None) is None


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
