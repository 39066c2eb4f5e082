"""The write matcher (grading/write_match.py) against ClawBench's own runtime code: for a corpus of
requests made from every bundled case's eval_schema, ClawBench's decision and body as this
project reads them equal what server.py's own functions (taken from the installed package's file,
not copied) make of them, and every request ClawBench would block is blocked here too. Then the
readings the harness adds: each a request the site reads as the submission, blocked."""

from __future__ import annotations

import ast
import gzip
import importlib.util
import json
import re
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlparse

import pytest

from pytest_webbench.design.clawbench import CASE_SETS, load_cases
from pytest_webbench.grading.write_match import (MAX_READ_BODY, WriteMatcher, clawbench_body, clawbench_intercepts,
                                                 clawbench_query, url_readings)
from regex_sample import sample

SERVER = Path(importlib.util.find_spec("clawbench").submodule_search_locations[0]) / "runtime" / "runtime-server" / "server.py"


def _server():
    """server.py's `_parse_body`, `_const_fields_match` and its query_params expression, compiled
    from the installed file; its order of tests (URL, method, body, params) around them."""
    tree = ast.parse(SERVER.read_text(), str(SERVER))
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in ("_parse_body", "_const_fields_match")]
    handler = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "start_cdp_handler")
    [query] = {ast.unparse(n.value) for n in ast.walk(handler)
               if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", None) == "query_params"}
    space = {"json": json, "parse_qs": parse_qs, "urlparse": urlparse}
    exec(compile(ast.Module(body=functions, type_ignores=[]), str(SERVER), "exec"), space)
    query_of = compile(query, str(SERVER), "eval")

    def decides(check: dict, method: str, url: str, post_data: str | None) -> bool:
        if not re.search(check["url_pattern"], url):
            return False
        if check.get("method") and method != check["method"]:
            return False
        params = eval(query_of, {**space, "parsed": urlparse(url)})  # noqa: S307 - server.py's own expression
        return (space["_const_fields_match"](check.get("body"), space["_parse_body"](post_data))
                and space["_const_fields_match"](check.get("params"), params))

    return decides, space["_parse_body"], lambda url: eval(query_of, {**space, "parsed": urlparse(url)})  # noqa: S307


def _form(fields: dict) -> str:
    return urlencode([(k, x) for k, v in fields.items() for x in (v if isinstance(v, list) else [v])
                      if not isinstance(x, (dict, list))])


def _corpus(check: dict) -> list[tuple[str, str, str | None]]:
    """(method, url, body) made from one eval_schema: matching and not, every body encoding,
    repeated keys, blanks, batches, fragments, case variants."""
    url = sample(check["url_pattern"])
    assert url is not None, check["url_pattern"]
    body, params = check.get("body") or {}, check.get("params") or {}
    urls = [url, url + "#frag", url.replace("https://", "HTTPS://", 1), re.sub(r"//([^/]+)", lambda m: "//" + m.group(1).upper(), url, count=1)]
    if params:
        sep = "&" if "?" in url else "?"
        urls += [url + sep + urlencode(params, doseq=True), url + sep + urlencode(params, doseq=True) + "&" + urlencode(params, doseq=True),
                 url + sep + urlencode({**params, "blank": ""}), url + sep + urlencode({k: f"{v}x" for k, v in params.items()})]
    bodies: list[str | None] = [None, "", "hello", '{"a": 1}', "a=1&b=", "[1, 2]", "NaN"]
    if body:
        first = next(iter(body))
        bodies += [json.dumps(body), json.dumps([{}, body]), json.dumps({**body, "extra": 1}), _form(body),
                   _form({**body, "extra": ""}), json.dumps({**body, first: "changed"}),
                   json.dumps({k: v.upper() if isinstance(v, str) else v for k, v in body.items()}),
                   json.dumps({"variables": body}), "\ufeff" + json.dumps(body)]
    methods = [check["method"], "GET" if check["method"] != "GET" else "POST"]
    return [(m, u, b) for m in methods for u in urls for b in bodies]


CASES = [(case_set, case) for case_set in CASE_SETS for case in load_cases(case_set) if case.gradable]


def test_every_bundled_case_is_decided_as_clawbench_s_runtime_decides_it():
    decides, parse_body, query = _server()
    compared = intercepted = 0
    for case_set, case in CASES:
        check = case.eval_schema.model_dump(include={"url_pattern", "method", "body", "params"})
        matcher = WriteMatcher(check)
        for method, url, body in _corpus(check):
            theirs = decides(check, method, url, body)
            assert clawbench_intercepts(check, method, url, body) == theirs, (case_set, case.name, method, url, body)
            decision = matcher.decide(method, url, None if body is None else body.encode(), post_data=body)
            assert decision.clawbench == theirs and json.dumps(decision.body) == json.dumps(parse_body(body)), (case_set, case.name, url, body)
            assert decision.query == query(url)
            assert decision.block or not theirs, (case_set, case.name, url, body)  # nothing ClawBench blocks goes through
            compared += 1
            intercepted += theirs
    assert len(CASES) == 242 and compared > 15000 and intercepted > 4000, (len(CASES), compared, intercepted)


def test_server_py_s_own_readings_are_those_of_this_module():
    _, parse_body, query = _server()
    for body in [None, "", "a=1&a=2&b=", '{"x": [1]}', "[1]", "plain text", "Infinity", "%%%", "a=%zz"]:
        assert clawbench_body(body) == parse_body(body), body
    for url in ["https://h/p?a=1&a=2&b=", "https://h/p?x=%20y#frag", "https://h/p"]:
        assert clawbench_query(url) == query(url)


ORDER = {"url_pattern": r"shop\.localhost(:\d+)?/checkout", "method": "POST",
         "body": {"items": "BOT-GRE-L:2", "name": "Webbench", "postcode": "QX417"}}
SHOP = "http://shop.localhost:8001"


def _multipart(fields: dict, boundary: str = "b0und") -> bytes:
    parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n' for k, v in fields.items()]
    return ("".join(parts) + f"--{boundary}--\r\n").encode()


@pytest.mark.parametrize("url,raw,content_type,encoding", [
    (SHOP + "/checkout", b"items=BOT-GRE-L%3A2&name=+Webbench+&postcode=qx417", "application/x-www-form-urlencoded", ""),
    (SHOP + "/checkout", _multipart(ORDER["body"]), "multipart/form-data; boundary=b0und", ""),
    (SHOP + "/checkout", _multipart(ORDER["body"]), "", ""),  # a boundary the type does not name
    (SHOP + "/checkout", json.dumps(ORDER["body"]).encode("utf-16"), "text/plain", ""),
    (SHOP + "/checkout", json.dumps(ORDER["body"]).encode("utf-16-be"), "", ""),  # no BOM: as json.loads(bytes) detects it
    (SHOP + "/checkout", b"\xef\xbb\xbf" + json.dumps(ORDER["body"]).encode(), "application/x-www-form-urlencoded", ""),
    # mtime=0: the header's time is in the test's id, which every xdist worker must collect alike
    (SHOP + "/checkout", gzip.compress(json.dumps(ORDER["body"]).encode(), mtime=0), "application/json", "gzip"),
    (SHOP + "/checkout", json.dumps({**ORDER["body"], "n": float("nan")}).encode(), "text/plain", ""),
    (SHOP + "/checkout", json.dumps([{"x": 1}, ORDER["body"]]).encode(), "application/json", ""),
    (SHOP + "/checkout", b"items=BOT-GRE-L:2&items=BOT-GRE-L:2&name=Webbench&postcode=QX417", "", ""),
    (SHOP + "/checkout", json.dumps({**ORDER["body"], "postcode": " qx417 "}).encode(), "", ""),
    ("http://127.0.0.1:8001/%63heckout", _multipart(ORDER["body"]), "", ""),
    ("http://LOCALHOST.:8001/check%6Fut?x=1", b"items=BOT-GRE-L:2&name=Webbench&postcode=QX417", "", ""),
    ("http://shop.localhost:8001//checkout", b"items=BOT-GRE-L:2&name=Webbench&postcode=QX417", "", ""),
])
def test_a_request_the_site_reads_as_the_submission_is_blocked_however_it_is_spelled(url, raw, content_type, encoding):
    decision = WriteMatcher(ORDER, {8001: "shop.localhost"}).decide("POST", url, raw, content_type, encoding)
    assert (decision.block, decision.reason) == (True, "match")
    assert decision.read_as is not None


@pytest.mark.parametrize("method,url,raw", [
    ("POST", SHOP + "/checkout", b"items=BOT-GRE-L:2&name=Someone&postcode=QX417"),  # another order: the site's to take
    ("POST", SHOP + "/cart/add", b"sku=BOT-GRE-L&qty=2"),
    ("GET", SHOP + "/checkout?items=BOT-GRE-L:2&name=Webbench&postcode=QX417", None),
    ("POST", "http://other.localhost:9000/checkout", b"items=BOT-GRE-L:2&name=Webbench&postcode=QX417"),
    ("POST", SHOP + "/checkout", b"\x00\x01binary"),
])
def test_a_request_that_is_not_the_submission_goes_on(method, url, raw):
    decision = WriteMatcher({**ORDER, "url_pattern": r"shop\.localhost(:\d+)?/checkout"}, {8001: "shop.localhost"}).decide(method, url, raw)
    assert not decision.block, decision


def test_where_the_body_cannot_be_read_a_request_to_the_submission_s_address_is_blocked():
    matcher = WriteMatcher(ORDER, {8001: "shop.localhost"})
    assert matcher.decide("POST", SHOP + "/checkout", b"x", body_unknown=True).reason == "unreadable"  # a file part CDP did not give
    assert matcher.decide("POST", SHOP + "/checkout", b"x" * (MAX_READ_BODY + 1)).reason == "unreadable"
    assert matcher.decide("POST", SHOP + "/checkout", b"\x1b\x00br", "", "br").reason == "unreadable"
    assert not matcher.decide("POST", SHOP + "/cart/add", b"x", body_unknown=True).block  # elsewhere, it goes on


def test_a_url_is_read_in_its_canonical_forms():
    readings = url_readings("http://127.0.0.1.:8001/a%2Fb/%7Euser/%41?q=1", {8001: "shop.localhost"})
    assert "http://shop.localhost:8001/a%2Fb/~user/A?q=1" in readings  # unreserved decoded, the slash kept
    assert "http://shop.localhost:8001/a/b/~user/A" in readings  # as a router decodes it, without the query
    assert url_readings("https://Example.COM.:443/x") == ["https://Example.COM.:443/x", "https://example.com/x"]
    # another port than a site's is not that site, whatever its name
    assert not any("shop.localhost" in r for r in url_readings("http://localhost:9999/x", {8001: "shop.localhost"}))


# -- the sites as the oracle: whatever spelling a site takes as the submission, the matcher blocks --
SITES = Path(__file__).resolve().parents[1] / "suites" / "local-web" / "sites"
ISSUE = {"url_pattern": r"codehub\.localhost(:\d+)?/api/v3/repos/acme/rocket/issues$", "method": "POST",
         "body": {"title": "Telemetry drops on reconnect", "labels": ["bug"]}}
ISSUE_JSON = json.dumps(ISSUE["body"])


def _parts(fmt: bytes, boundary: bytes = b"BBB", fields=None) -> bytes:
    fields = fields or [(b"items", b"BOT-GRE-L:2"), (b"name", b"Webbench"), (b"postcode", b"QX417")]
    return b"".join(b"--" + boundary + b"\r\n" + (fmt % k) + b"\r\n\r\n" + v + b"\r\n" for k, v in fields) + b"--" + boundary + b"--\r\n"


SPELLINGS = [  # (site, body, content types): each taken by the site as the submission
    ("codehub", ISSUE_JSON.encode(), ["application/json"]),
    ("codehub", ISSUE_JSON.encode("utf-32-be"), ["text/plain"]),
    ("codehub", ISSUE_JSON.encode("utf-32-le"), []),
    ("codehub", ISSUE_JSON.encode("utf-16-le"), ["text/plain; charset=undefined"]),
    ("codehub", json.dumps({**ISSUE["body"], "labels": {"bug": 1}}).encode(), ["application/json"]),
    ("codehub", json.dumps({"title": "Telemetry\u0020drops on reconnect", "labels": ["bug"], "x": "1" * 5000}).encode(), []),
    ("codehub", b'{"title": "\\u0054elemetry drops on reconnect", "labels": ["\\u0062ug"]}', ["application/json"]),
    ("codehub", b'{"title": "x", "title": "Telemetry drops on reconnect", "labels": ["bug"]}', ["application/json"]),
    ("shop", _parts(b'Content-Disposition: form-data; name="%s"'), ["multipart/form-data; boundary=BBB"]),
    ("shop", _parts(b"Content-Disposition: form-data; name=%s"), ["multipart/form-data; boundary=BBB"]),
    ("shop", _parts(b'Content-Disposition: form-data; NAME="%s"'), ["multipart/form-data; boundary=BBB"]),
    ("shop", _parts(b'Content-Disposition: form-data; name = "%s"'), ["multipart/form-data; boundary=BBB"]),
    ("shop", _parts(b'Content-Disposition: form-data; xname="zz"; name="%s"'), ["multipart/form-data; boundary=BBB"]),
    ("shop", _parts(b'X-A: name="zz"\r\nContent-Disposition: form-data; name="%s"'), ["multipart/form-data; boundary=BBB"]),
    ("shop", _parts(b'Content-Disposition: form-data; name="%s"'), ["multipart/form-data; boundary= BBB"]),
    ("shop", _parts(b'Content-Disposition: form-data; name="%s"'), ["multipart/form-data; boundary=AAA; boundary=BBB"]),
    ("shop", _parts(b'Content-Disposition: form-data; name="%s"', b"a'b(c)"), ["multipart/form-data; boundary=\"a'b(c)\""]),
    ("shop", _parts(b'content-disposition: FORM-DATA; name="%s"'), ["multipart/form-data; boundary=BBB", "text/plain"]),
    # names and values in EBCDIC, the charset spelled as python-multipart reads it and a regex would not
    ("shop", _parts(b'Content-Disposition: form-data; name="%s"',
                    fields=[(k.encode("cp037"), v.encode("cp037")) for k, v in
                            [("items", "BOT-GRE-L:2"), ("name", "Webbench"), ("postcode", "QX417")]]),
     ["multipart/form-data; boundary=BBB; CHARSET = cp037"]),
    # a lone surrogate elsewhere: json.loads(bytes) keeps it, a strict decode would give up on the whole body
    ("codehub", ISSUE_JSON.replace('"labels"', '"x": "\ud800", "labels"').encode("utf-16-le", "surrogatepass"), ["text/plain"]),
    ("codehub", ISSUE_JSON.replace('"labels"', '"x": "\ud800", "labels"').encode("utf-32", "surrogatepass"), []),
    ("shop", b"items=BOT-GRE-L%3A2&name=%57ebbench&postcode=qx417+", ["application/x-www-form-urlencoded"]),
    ("shop", b"items=BOT-GRE-L:2&name=Someone&postcode=QX417&name=Webbench", ["application/x-www-form-urlencoded; charset=latin-1"]),
]


def _site_takes(app, path: str, body: bytes, types: list[str]) -> int:
    import asyncio

    sent = False

    async def receive():
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    status = {}

    async def send(message):
        if message["type"] == "http.response.start":
            status["code"] = message["status"]

    headers = [(b"host", b"x")] + [(b"content-type", t.encode("latin-1")) for t in types]
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http", "path": path,
             "raw_path": path.encode(), "query_string": b"", "headers": headers, "server": ("127.0.0.1", 1),
             "client": ("127.0.0.1", 2), "root_path": ""}
    asyncio.run(app(scope, receive, send))
    return status.get("code", 0)


@pytest.fixture(scope="module")
def site_apps(tmp_path_factory):
    import os
    import sys

    folder = tmp_path_factory.mktemp("site-writes")
    saved = {k: os.environ.get(k) for k in ("SITE_WRITES_LOG", "SHOP_ORDERS_LOG")}
    os.environ["SITE_WRITES_LOG"], os.environ["SHOP_ORDERS_LOG"] = str(folder / "codehub"), str(folder / "shop")
    sys.path.insert(0, str(SITES))
    apps = {}
    for name in ("codehub", "shop"):
        spec = importlib.util.spec_from_file_location(f"matcher_oracle_{name}", SITES / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        apps[name] = module.create_app()
    yield apps, folder
    for key, value in saved.items():
        os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)


@pytest.mark.parametrize("site,body,types", SPELLINGS, ids=[f"{s}-{i}" for i, (s, _, _) in enumerate(SPELLINGS)])
def test_whatever_spelling_a_site_takes_for_the_submission_is_blocked(site_apps, site, body, types):
    apps, folder = site_apps
    check, path = (ISSUE, "/api/v3/repos/acme/rocket/issues") if site == "codehub" else (ORDER, "/checkout")
    _site_takes(apps[site], path, body, types)
    log = folder / site
    written = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    log.unlink(missing_ok=True)
    taken = [w for w in written if all(w.get(k) == v for k, v in check["body"].items())]
    assert taken, f"the site did not take this spelling as the submission ({written}): the case proves nothing"
    host = "codehub.localhost:5001" if site == "codehub" else "shop.localhost:8001"
    decision = WriteMatcher(check).decide("POST", f"http://{host}{path}", body, types)
    assert decision.block, decision


def test_a_reading_that_fails_blocks_and_a_bomb_is_not_inflated():
    import tracemalloc

    matcher = WriteMatcher(ISSUE)
    url = "http://codehub.localhost:5001/api/v3/repos/acme/rocket/issues"
    bomb = gzip.compress(b"0" * (64 * 1024 * 1024))
    tracemalloc.start()
    decision = matcher.decide("POST", url, bomb, "application/json", "gzip")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert (decision.block, decision.reason) == (True, "unreadable") and peak < 40 * 1024 * 1024
    assert not matcher.decide("POST", "http://codehub.localhost:5001/elsewhere", bomb, "", "gzip").block
    # a number past Python's digit limit breaks server.py's own reading: no exception leaves the matcher
    assert not matcher.decide("POST", "http://codehub.localhost:5001/elsewhere", b"1" * 5000).block
    assert matcher.decide("POST", url, b"1" * 5000, "text/plain; charset=punycode").block is False
