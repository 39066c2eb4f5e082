"""Which request is a write task's submission: one matcher, used by the browser's interceptor (the
harness's CDP connection, every target) and by the site's door (the harness's forwarding of the
site's ports), so both block the same requests.

Two answers per request:
- `clawbench`: ClawBench's own decision, exactly as its runtime (runtime-server/server.py) makes it:
  the body read as JSON whatever its type, else as a form, else as text; a list body matched when
  one item matches; repeated query keys kept as a list and blank values dropped. Recorded as a fact.
- `block`: the harness's. A request the site could read as the submission is blocked, whatever its
  spelling: the URL is read in its canonical forms (host lowercased, trailing dot gone, the site's
  loopback aliases, percent-encoding decoded as the site's router decodes it, the query ignored
  against an anchored pattern), the body every way the site could read it (JSON under any type,
  a BOM, UTF-16, a form, multipart, gzip), and fields compared as sites normalise them (case,
  surrounding spaces, a number as text). A request to the submission's address whose body none of
  these readings makes sense of is blocked too: where the harness cannot tell, it blocks.
"""

from __future__ import annotations

import codecs
import json
import logging
import re
import zlib
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, unquote_plus, urlsplit, urlunsplit

READ_ONLY_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_QUIET = logging.getLogger("pytest_webbench.write_match.quiet")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False
MAX_READ_BODY = 1024 * 1024  # a body past this is not read: at the submission's address it is blocked (a form is far less)
LOOPBACK_HOSTS = re.compile(r"^(localhost|127(\.\d{1,3}){3}|\[::1\]|0\.0\.0\.0|\[::\]|[a-z0-9.-]+\.localhost)$")
UNRESERVED = re.compile(r"%(4[1-9A-Fa-f]|5[0-9Aa]|6[1-9A-Fa-f]|7[0-9Aa]|3[0-9]|2[dDeE]|5[fF]|7[eE])")


# -- ClawBench's decision, as server.py makes it ---------------------------------------------------
def clawbench_body(post_data: str | None) -> Any:
    """server.py `_parse_body`: JSON, else a form (blank values kept), else the text itself."""
    if not post_data:
        return None
    try:
        return json.loads(post_data)
    except (json.JSONDecodeError, TypeError):
        try:
            parsed = parse_qs(post_data, keep_blank_values=True)
            if parsed:
                return {k: v[0] if len(v) == 1 else v for k, v in parsed.items()}
        except Exception:  # noqa: BLE001 - as server.py: whatever the form parser makes of it, the text stays
            pass
        return post_data


def clawbench_query(url: str) -> dict[str, Any]:
    """server.py's query_params: blank values dropped, a repeated key kept as a list."""
    return {k: v[0] if len(v) == 1 else v for k, v in parse_qs(urlsplit(url).query).items()}


def clawbench_fields_match(expected: Any, actual: Any) -> bool:
    """server.py `_const_fields_match`."""
    if not expected:
        return True
    if not actual:
        return False
    if isinstance(actual, list):
        return any(clawbench_fields_match(expected, item) for item in actual)
    if not isinstance(actual, dict):
        return False
    return all(actual.get(k) == v for k, v in expected.items())


def clawbench_intercepts(check: dict, method: str, url: str, post_data: str | None) -> bool:
    """Whether ClawBench's runtime would block this request (its order of tests, its first match)."""
    if not re.search(check["url_pattern"], url):
        return False
    if check.get("method") and method != check["method"]:
        return False
    return (clawbench_fields_match(check.get("body"), clawbench_body(post_data))
            and clawbench_fields_match(check.get("params"), clawbench_query(url)))


# -- the harness's decision: every reading the site could make -------------------------------------
def url_readings(url: str, site_hosts: dict[int, str] | None = None) -> list[str]:
    """The URL as the browser sent it, and as the site reads it: host lowercased and without a
    trailing dot; a loopback alias at a site's port named as that site (`site_hosts`: port ->
    host); percent-encoded unreserved characters decoded, then the whole path decoded as a router
    does, then its runs of slashes merged; each with and without its query."""
    readings = [url]
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").rstrip(".").lower()
        port = parts.port
    except ValueError:
        return readings
    default = {"http": 80, "https": 443}.get(parts.scheme.lower())
    if site_hosts and port in site_hosts and LOOPBACK_HOSTS.match(host if ":" not in host else f"[{host}]"):
        host = site_hosts[port]
    netloc = host if port in (None, default) else f"{host}:{port}"
    decoded = unquote(parts.path)
    # a web server's (nginx merges slashes by default)
    for path in (UNRESERVED.sub(lambda m: chr(int(m.group(1), 16)), parts.path), decoded, re.sub("/{2,}", "/", decoded)):
        for query in (parts.query, ""):
            readings.append(urlunsplit((parts.scheme.lower(), netloc, path, query, "")))
    return list(dict.fromkeys(readings))


def _charset(content_type: str) -> str | None:
    """The charset a site reads from the type: python-multipart's parameter parser, as Starlette's
    form parser uses it (spaces around `=`, any case, quotes), so the matcher decodes as the site does."""
    from python_multipart.multipart import parse_options_header

    found = parse_options_header(content_type)[1].get(b"charset")
    return found.decode("latin-1") if found else None


def _decoded(raw: bytes, name: str) -> str | None:
    """The bytes as `name` decodes them; a lone surrogate kept as json.loads(bytes) keeps it."""
    try:
        return raw.decode(name)
    except UnicodeDecodeError:
        try:
            return raw.decode(name, "surrogatepass")
        except (UnicodeError, LookupError):
            return None
    except (LookupError, UnicodeError, ValueError):  # a charset the page named that is none
        return None


def _texts(raw: bytes, content_types: list[str]) -> list[str]:
    """The body as text every way a site could decode it: the charset of any of its types, a BOM's,
    what json.loads detects in bytes (UTF-16 and UTF-32 without a BOM), UTF-8, Latin-1."""
    encodings = [c for kind in content_types if (c := _charset(kind))]
    for bom, name in ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
                      (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16")):
        if raw.startswith(bom):
            encodings.insert(0, name)
            break
    encodings.append(json.detect_encoding(raw))  # what a site's json.loads(body) reads the bytes as
    texts = [text.lstrip("\ufeff") for name in dict.fromkeys([*encodings, "utf-8", "latin-1"])
             if (text := _decoded(raw, name)) is not None]
    return list(dict.fromkeys(texts))


def _multipart(raw: bytes, content_type: str) -> list[dict[str, Any]]:
    """A multipart body's fields as Starlette reads them (python-multipart, its parser), by the
    boundary its type names or, with none or another, its first line's."""
    from python_multipart.multipart import MultipartParser, parse_options_header

    boundaries = [parse_options_header(content_type)[1].get(b"boundary")]
    charset = _charset(content_type) or "utf-8"
    first = raw.split(b"\r\n", 1)[0]
    if first.startswith(b"--") and 2 < len(first) <= 200:
        boundaries.append(first[2:])
    readings = []
    for boundary in dict.fromkeys(b for b in boundaries if b):
        fields: dict[str, Any] = {}
        part = {"head": [], "field": b"", "value": b"", "data": bytearray()}

        def header_end() -> None:
            part["head"].append((part["field"].lower(), part["value"]))
            part["field"] = part["value"] = b""

        def part_end() -> None:
            disposition = dict(part["head"]).get(b"content-disposition", b"")
            name = parse_options_header(disposition)[1].get(b"name")
            if name is not None:
                key, text = _site_text(name, charset), _site_text(bytes(part["data"]), charset)
                fields[key] = [*fields[key], text] if isinstance(fields.get(key), list) else (
                    [fields[key], text] if key in fields else text)
            part.update(head=[], data=bytearray())

        callbacks = {"on_header_field": lambda d, a, b: part.__setitem__("field", part["field"] + d[a:b]),
                     "on_header_value": lambda d, a, b: part.__setitem__("value", part["value"] + d[a:b]),
                     "on_header_end": header_end, "on_part_data": lambda d, a, b: part["data"].extend(d[a:b]),
                     "on_part_end": part_end}
        parser = MultipartParser(boundary, callbacks)
        parser.logger = _QUIET  # a page's malformed body is no warning of the harness's
        try:
            parser.write(raw)
        except Exception:  # noqa: BLE001 - a body this parser refuses: the fields read so far are kept
            pass
        if fields:
            readings.append(fields)
    return readings


def _site_text(data: bytes, charset: str) -> str:
    """A multipart name or value as Starlette decodes it (its `_user_safe_decode`: the charset, else UTF-8)."""
    try:
        return data.decode(charset)
    except (UnicodeDecodeError, LookupError):
        return data.decode("utf-8", "replace")


def _unpacked(raw: bytes, content_encoding: str) -> bytes | None:
    """The body a site that decodes its Content-Encoding reads; None where it cannot be read within
    MAX_READ_BODY (a coding not read here, a bomb) or is not one."""
    coding = content_encoding.strip().lower()
    if coding in ("", "identity"):
        return raw
    if coding not in ("gzip", "x-gzip", "deflate"):  # br, a list of codings, a name no site knows: not read here
        return None
    inflater = zlib.decompressobj(wbits=47 if coding != "deflate" else 15)  # 47: gzip or zlib, by the header
    try:
        out = inflater.decompress(raw, MAX_READ_BODY)
    except zlib.error:
        return None
    return None if inflater.unconsumed_tail else out


def body_readings(raw: bytes | None, content_types: str | list[str] = "", content_encoding: str = "") -> list[Any] | None:
    """Every structure a site could read the body as (JSON values, forms, multipart fields), and
    the body's texts (decoded, and percent-decoded) as strings; None where the body cannot be read
    within MAX_READ_BODY."""
    if not raw:
        return []
    kinds = [content_types] if isinstance(content_types, str) else list(content_types) or [""]
    if len(raw) > MAX_READ_BODY or (unpacked := _unpacked(raw, content_encoding)) is None:
        return None
    readings: list[Any] = []
    bodies = [unpacked] if unpacked is raw else [unpacked, raw]  # a site that decodes its coding, one that does not
    texts = list(dict.fromkeys(t for body in bodies for t in _texts(body, kinds)))
    for text in texts:
        try:
            readings.append(json.loads(text))
        except (ValueError, RecursionError):
            pass
        form = parse_qs(text, keep_blank_values=True)
        if form:
            readings.append({k: v[0] if len(v) == 1 else v for k, v in form.items()})
    for body in bodies:
        for kind in dict.fromkeys(kinds):
            readings += _multipart(body, kind)
    readings += texts + [unquote_plus(text) for text in texts]
    return readings


def _leaves(value: Any) -> list[str]:
    """An expected value's scalars, as text a site's body would carry them in."""
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v)]
    if value is None or isinstance(value, bool):
        return []
    return [_folded(str(value))]


def _folded(text: str) -> str:
    return " ".join(text.casefold().split())


def carries(expected: dict, readings: list[Any]) -> bool:
    """Every expected value is written somewhere in the body, in some reading of it: whatever shape
    the site reads it in (a list as an object's keys, a field under another spelling of its name),
    a body that carries every value of the submission is taken for it."""
    leaves = _leaves(expected)
    if not leaves:
        return False
    texts = [_folded(r if isinstance(r, str) else json.dumps(r, ensure_ascii=False, default=str)) for r in readings]
    return all(any(leaf in text for text in texts) for leaf in leaves)


def _same(expected: Any, actual: Any) -> bool:
    """Equal as a site that normalises would read them: text case and surrounding spaces, a number
    as text, a one-item list for its item, a list or object sent as JSON text, a repeated field."""
    if expected == actual:
        return True
    if isinstance(actual, str) and isinstance(expected, (dict, list)):
        try:
            return _same(expected, json.loads(actual))
        except (ValueError, RecursionError):
            return False
    if isinstance(expected, dict):
        return isinstance(actual, dict) and fields_match(expected, actual)
    if isinstance(expected, list):
        items = actual if isinstance(actual, list) else [actual]
        return len(items) == len(expected) and all(any(_same(e, a) for a in items) for e in expected)
    if isinstance(actual, list):
        return any(_same(expected, a) for a in actual)
    if isinstance(actual, (dict, type(None))):
        return False
    return _scalar(expected) == _scalar(actual)


def _scalar(value: Any) -> str:
    text = str(value).strip().casefold() if not isinstance(value, bool) else str(value).lower()
    try:
        number = float(text)
    except ValueError:
        return text
    return repr(number) if number == number else text


def fields_match(expected: dict | None, actual: Any) -> bool:
    """Every expected field in the reading (a list reading: in one of its items)."""
    if not expected:
        return True
    if isinstance(actual, list):
        return any(fields_match(expected, item) for item in actual)
    if not isinstance(actual, dict):
        return False
    folded = {str(k).strip().casefold(): v for k, v in actual.items()}
    return all(_same(v, actual[k] if k in actual else folded.get(str(k).strip().casefold(), _ABSENT))
               for k, v in expected.items())


_ABSENT = object()


@dataclass
class Decision:
    block: bool
    # "match", "unreadable" (at the submission's address, a body no reading makes sense of), "pass"; the
    # interceptor adds "refused" (the site's door: an upgrade, a body past its bound) and "after_end"
    reason: str
    clawbench: bool  # ClawBench's own runtime would have blocked it
    body: Any = None  # ClawBench's reading of the body, what its judge is shown
    query: dict = field(default_factory=dict)
    read_as: Any = None  # a blocked submission's body as the site would have read it
    how: str | None = None  # which reading blocked it, or why it could not be read


@dataclass
class WriteMatcher:
    """A write task's check (url_pattern, method, body, params) and the trial's site hosts by port."""

    check: dict
    site_hosts: dict[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.folded = re.compile(self.check["url_pattern"], re.IGNORECASE)  # a path's case is the site's to read
        self.method = (self.check.get("method") or "").upper()

    def decide(self, method: str, url: str, raw: bytes | None, content_type: str | list[str] = "",
               content_encoding: str = "", post_data: str | None = None, body_unknown: bool = False) -> Decision:
        """`raw`: the body's bytes as sent; `post_data`: the text CDP gives (ClawBench reads that);
        `content_type`: every Content-Type the request carries (a site may read any one of them);
        `body_unknown`: there is a body the reader was not given (a file's part, CDP's omission).
        A request this reading fails on (whatever the page made it of) is blocked, never passed."""
        try:
            return self._decide(method, url, raw, content_type, content_encoding, post_data, body_unknown)
        except Exception as exc:  # noqa: BLE001 - fails closed: the harness cannot tell, so it blocks
            return Decision(True, "unreadable", False, how=f"{type(exc).__name__}: {str(exc)[:200]}")

    def _decide(self, method, url, raw, content_type, content_encoding, post_data, body_unknown) -> Decision:
        if post_data is None and raw is not None:
            post_data = raw.decode("utf-8", "replace")
        try:
            clawbench = clawbench_intercepts(self.check, method, url, post_data)
            seen = Decision(False, "pass", clawbench, clawbench_body(post_data), clawbench_query(url))
        except ValueError as exc:  # server.py's own reading raises (a 5000-digit number): its runtime would stop here
            clawbench, seen = False, Decision(False, "pass", False, how=f"ClawBench's reading fails: {exc}"[:200])
        urls = url_readings(url, self.site_hosts)
        if (self.method and method.upper() != self.method) or not any(self.folded.search(u) for u in urls):
            if clawbench:  # never: ClawBench's reading is one of ours; kept so no refactor lets one through
                seen.block, seen.reason = True, "match"
            return seen
        params, body = self.check.get("params"), self.check.get("body")
        if params:
            queries = [{k: v[0] if len(v) == 1 else v for k, v in parse_qs(urlsplit(u).query, keep_blank_values=True).items()}
                       for u in urls]
            if not (clawbench or any(fields_match(params, q) for q in queries) or carries(params, [unquote_plus(u) for u in urls])):
                return seen
        readings = None if body_unknown else body_readings(raw, content_type, content_encoding)
        fitting = next((r for r in readings if fields_match(body, r)), None) if body and readings else None
        seen.read_as = fitting if fitting is not None else seen.body
        if body and readings is None:
            seen.block, seen.reason = True, "unreadable"
        elif clawbench or not body:
            seen.block, seen.reason, seen.how = True, "match", "clawbench" if clawbench else "address"
        elif fitting is not None:
            seen.block, seen.reason, seen.how = True, "match", "fields"
        elif carries(body, readings):
            seen.block, seen.reason, seen.how = True, "match", "carries every value"
        return seen
