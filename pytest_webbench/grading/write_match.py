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
import gzip
import json
import re
import zlib
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit, urlunsplit

READ_ONLY_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
MAX_READ_BODY = 8 * 1024 * 1024  # a body past this is not read: at the submission's address it is blocked
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


def _texts(raw: bytes, content_type: str) -> list[str]:
    """The body as text every way a site could decode it: its charset, a BOM's, UTF-8, Latin-1."""
    found = re.search(r"charset=\"?([\w.:-]+)", content_type, re.I)
    encodings = [found.group(1)] if found else []
    for bom, name in ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
                      (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16")):
        if raw.startswith(bom):
            encodings.insert(0, name)
            break
    if len(raw) >= 2 and raw[0] == 0 and raw[1] != 0:
        encodings.append("utf-16-be")  # what json.loads(bytes) detects without a BOM
    elif len(raw) >= 2 and raw[0] != 0 and raw[1] == 0:
        encodings.append("utf-16-le")
    texts = []
    for name in [*encodings, "utf-8", "latin-1"]:
        try:
            text = raw.decode(name)
        except (LookupError, UnicodeDecodeError):
            continue
        texts.append(text.lstrip("\ufeff"))
    return list(dict.fromkeys(texts))


def _multipart(raw: bytes, content_type: str) -> dict[str, Any] | None:
    """A multipart body's fields (a file's content as text), by the boundary its type names or,
    with none, its first line."""
    found = re.search(r"boundary=\"?([^\";,]+)", content_type, re.I)
    boundary = found.group(1).encode() if found else None
    if boundary is None:
        first = raw.split(b"\r\n", 1)[0]
        if not (first.startswith(b"--") and 2 < len(first) <= 72):
            return None
        boundary = first[2:]
    fields: dict[str, Any] = {}
    for part in raw.split(b"--" + boundary)[1:]:
        head, sep, value = part.partition(b"\r\n\r\n")
        name = re.search(rb"name=\"([^\"]*)\"", head)
        if not sep or name is None:
            continue
        key = name.group(1).decode("utf-8", "replace")
        text = value.removesuffix(b"\r\n").decode("utf-8", "replace")
        fields[key] = [*fields[key], text] if isinstance(fields.get(key), list) else ([fields[key], text] if key in fields else text)
    return fields or None


def _unpacked(raw: bytes, content_encoding: str) -> bytes | None:
    coding = content_encoding.strip().lower()
    try:
        if coding in ("gzip", "x-gzip"):
            return gzip.decompress(raw)[:MAX_READ_BODY]
        if coding == "deflate":
            return zlib.decompress(raw)[:MAX_READ_BODY]
    except (OSError, zlib.error, EOFError):
        return None
    return raw if coding in ("", "identity") else None


def body_readings(raw: bytes | None, content_type: str = "", content_encoding: str = "") -> list[Any] | None:
    """Every structure a site could read the body as (JSON values, forms, multipart fields); None
    when there is a body and no reading makes a structure of it (the harness cannot tell)."""
    if not raw:
        return []
    if len(raw) > MAX_READ_BODY or (raw := _unpacked(raw, content_encoding)) is None:
        return None
    readings: list[Any] = []
    for text in _texts(raw, content_type):
        try:
            readings.append(json.loads(text))
        except (ValueError, RecursionError):
            pass
        form = parse_qs(text, keep_blank_values=True)
        if form:
            readings.append({k: v[0] if len(v) == 1 else v for k, v in form.items()})
    if (fields := _multipart(raw, content_type)) is not None:
        readings.append(fields)
    structured = [r for r in readings if isinstance(r, (dict, list))]
    return structured or None


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
    reason: str  # "match", "unreadable" (at the submission's address, a body no reading makes sense of), or "pass"
    clawbench: bool  # ClawBench's own runtime would have blocked it
    body: Any = None  # ClawBench's reading of the body, what its judge is shown
    query: dict = field(default_factory=dict)
    read_as: Any = None  # a blocked submission's body as the site would have read it


@dataclass
class WriteMatcher:
    """A write task's check (url_pattern, method, body, params) and the trial's site hosts by port."""

    check: dict
    site_hosts: dict[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.pattern = re.compile(self.check["url_pattern"])
        self.folded = re.compile(self.check["url_pattern"], re.IGNORECASE)
        self.method = (self.check.get("method") or "").upper()

    def needs_decision(self, method: str) -> bool:
        """Requests a reader must hold for `decide`: every mutating one, and the check's own method."""
        method = method.upper()
        return method not in READ_ONLY_METHODS or method == self.method

    def decide(self, method: str, url: str, raw: bytes | None, content_type: str = "", content_encoding: str = "",
               post_data: str | None = None, body_unknown: bool = False) -> Decision:
        """`raw`: the body's bytes as sent; `post_data`: the text CDP gives (ClawBench reads that);
        `body_unknown`: there is a body the reader was not given (a file's part, CDP's omission)."""
        if post_data is None and raw is not None:
            post_data = raw.decode("utf-8", "replace")
        clawbench = clawbench_intercepts(self.check, method, url, post_data)
        seen = Decision(False, "pass", clawbench, clawbench_body(post_data), clawbench_query(url))
        if (self.method and method.upper() != self.method) or not any(
                self.folded.search(reading) for reading in url_readings(url, self.site_hosts)):
            if clawbench:  # never: ClawBench's reading is one of ours; kept so no refactor lets one through
                seen.block, seen.reason = True, "match"
            return seen
        readings = None if body_unknown else body_readings(raw, content_type, content_encoding)
        queries = [parse_qs(urlsplit(u).query, keep_blank_values=True) for u in url_readings(url, self.site_hosts)]
        params_ok = not self.check.get("params") or any(
            fields_match(self.check["params"], {k: v[0] if len(v) == 1 else v for k, v in q.items()}) for q in queries)
        if readings is None and self.check.get("body"):
            seen.block, seen.reason = True, "unreadable"
        elif clawbench or (params_ok and (not self.check.get("body") or any(fields_match(self.check["body"], r) for r in readings or []))):
            seen.block, seen.reason = True, "match"
            seen.read_as = next((r for r in readings or [] if fields_match(self.check.get("body"), r)), seen.body)
        return seen
