"""The trajectory scan: did the agent reach the site, the browser backend or the task's files other
than through the arm's browser tools?

It reads the tool calls the model asked for as the model gateway recorded them (the transcript of
record: grading/transcript.py), not the CLI's own trajectory, which the agent can write. Every call
that is not a browser MCP tool (a shell command, a file read, a fetch) is read as a resolver would
read it: every host in it is resolved to what it names (IPv4 in its short, octal, hex and integer
forms; IPv6, IPv4-mapped included; `localhost` and its aliases), so `127.1:8080`, `0x7f000001`,
`[::ffff:127.0.0.1]` or `shop.localhost` are the loopback they are; base64 and hex payloads are
decoded and read too, and a decoded payload handed to a shell or an interpreter is flagged itself.
A flag goes into the trial's record and the report; it never changes a score (the seal is what stops
the call).
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ..results.well_formed import well_formed

BROWSER_TOOLS = ("execute_playwright_code", "browser_repl", "execute_browser_repl", "computer_action", "webmcp")
MAX_SHOWN = 160
LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback", "0")
# host[:port] candidates: a bracketed IPv6 literal, or a run of host characters, then an optional port
_HOST_PORT = re.compile(r"\[([0-9a-fA-F:.%]+)\](?::(\d{1,5}))?|(?<![\w.-])([A-Za-z0-9_][\w.-]*|0[xX][0-9a-fA-F]+)(?::(\d{1,5}|\$\S*|`[^`]*`))?")
_BARE_IPV6 = re.compile(r"(?<![\w:])((?:[0-9a-fA-F]{0,4}:){2,7}(?:[0-9a-fA-F]{0,4}|\d+\.\d+\.\d+\.\d+))(?![\w:])")
_BASE64 = re.compile(r"[A-Za-z0-9+/]{16,}={0,2}")
_HEX = re.compile(r"(?:\\x[0-9a-fA-F]{2}){4,}|\b(?:[0-9a-fA-F]{2}){8,}\b")
_DECODE = re.compile(r"base64\s+(-d|--decode|-D)|b64decode|atob\(|xxd\s+-r|openssl\s+(enc|base64)\s.*-d|"
                     r"fromhex|Buffer\.from\([^)]*,\s*['\"](base64|hex)|\\x[0-9a-fA-F]{2}|codecs\.decode", re.I)
_RUN = re.compile(r"\|\s*(sh|bash|zsh|dash|python3?|node|perl|ruby)\b|\beval\b|\bexec\s*\(|\bsource\s+<\(|"
                  r"(^|\s)\.\s+<\(|\b(sh|bash|python3?|node|perl)\s+-[ce]\b|\$\(\s*echo", re.I)


def is_browser_tool(name: str) -> bool:
    """`webmcp`, `mcp__browser__webmcp`, `browser.webmcp`, `browser_webmcp`: the proxy's tools."""
    return any(name == tool or name.endswith(("__" + tool, "." + tool, "_" + tool)) for tool in BROWSER_TOOLS)


def load_trajectory_steps(trajectory: Path) -> list[dict]:
    """The steps of Harbor's ATIF trajectory (the CLI's own account, converted from files the agent
    can write); none if unreadable. Made what a record can hold (well_formed), each step's tool
    calls a list of objects: what the agent wrote there can fail no reader of it."""
    try:
        steps = json.loads(trajectory.read_text(encoding="utf-8")).get("steps") or []
    except (OSError, ValueError, AttributeError, RecursionError):
        return []
    if not isinstance(steps, list):
        return []
    out = []
    for step in well_formed(steps):
        if isinstance(step, dict):
            calls = step.get("tool_calls")
            if calls is not None:
                step = {**step, "tool_calls": [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []}
            out.append(step)
    return out


def ipv4_of(text: str) -> ipaddress.IPv4Address | None:
    """An IPv4 address as inet_aton reads it (what curl, wget and ping accept): 1 to 4 parts, each
    decimal, octal (leading 0) or hex (0x), the last filling the remaining bytes."""
    parts = text.split(".")
    if not 1 <= len(parts) <= 4 or any(not p for p in parts):
        return None
    values = []
    for part in parts:
        try:
            if part.lower().startswith("0x"):
                values.append(int(part[2:] or "0", 16))
            elif len(part) > 1 and part.startswith("0"):
                values.append(int(part, 8))
            else:
                values.append(int(part, 10))
        except ValueError:
            return None
    *head, last = values
    if any(v > 255 for v in head) or last >= 256 ** (4 - len(head)):
        return None
    number = 0
    for v in head:
        number = number * 256 + v
    number = number * 256 ** (4 - len(head)) + last
    return ipaddress.IPv4Address(number)


def is_loopback(host: str) -> bool:
    """Whether a host names this machine as a resolver sees it (0.0.0.0 included: connecting to it
    reaches the loopback)."""
    host = host.strip("[]").lower().rstrip(".")
    if host in LOOPBACK_NAMES or host.endswith(".localhost"):
        return True
    address = ipv4_of(host)
    if address is None:
        try:
            v6 = ipaddress.IPv6Address(host.split("%")[0])
        except ValueError:
            return False
        address = v6.ipv4_mapped or v6
        if isinstance(address, ipaddress.IPv6Address):
            return address.is_loopback or address.is_unspecified
    return address.is_loopback or address == ipaddress.IPv4Address(0)


@dataclass(frozen=True)
class Target:
    """Something an agent must reach only through its browser tools: hosts (names a resolver
    would not send to the loopback, like a public site's), loopback ports, and folder paths."""
    label: str
    hosts: frozenset[str] = frozenset()
    ports: frozenset[int] = frozenset()
    paths: tuple[str, ...] = ()


def targets_for(label: str, urls: list[str] = (), paths: list[str] = ()) -> Target:
    hosts, ports = set(), set()
    for url in urls:
        parts = urlsplit(url)
        if parts.hostname:
            hosts.add(parts.hostname.lower())
            if parts.port:
                ports.add(parts.port)
    return Target(label, frozenset(h for h in hosts if not is_loopback(h)), frozenset(ports), tuple(p for p in paths if p))


def _hosts_and_ports(text: str):
    for m in _HOST_PORT.finditer(text):
        host = m.group(1) or m.group(3)
        port = m.group(2) or m.group(4)
        yield host, port
    for m in _BARE_IPV6.finditer(text):
        yield m.group(1), None


def reached(text: str, target: Target) -> bool:
    if any(path in text for path in target.paths):
        return True
    for host, port in _hosts_and_ports(text):
        name = host.lower().rstrip(".")
        if name in target.hosts:
            return True
        if target.ports and is_loopback(name) and port is not None:
            # a port the shell computes ($P, `...`) could be any of them: loopback with it is a reach
            if not port.isdigit() or int(port) in target.ports:
                return True
    return False


def decoded_payloads(text: str) -> list[str]:
    """Base64 and hex runs in a command, decoded where they decode to text."""
    out = []
    for blob in _BASE64.findall(text):
        try:
            decoded = base64.b64decode(blob + "=" * (-len(blob) % 4), validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            continue
        if decoded.isprintable() or "\n" in decoded:
            out.append(decoded)
    for blob in _HEX.findall(text):
        try:
            out.append(bytes.fromhex(blob.replace("\\x", "")).decode("utf-8"))
        except ValueError:
            continue
    return out


def scan_calls(calls: list[dict], targets: list[Target]) -> list[str]:
    """Flags, one per offending tool call (`calls`: the gateway's record, each {name, arguments})."""
    flags = []
    for call in calls:
        name = str(call.get("name", ""))
        if is_browser_tool(name):
            continue
        text = call.get("arguments") if isinstance(call.get("arguments"), str) else json.dumps(call.get("arguments"))
        texts = [text]
        for _ in range(2):  # a payload inside a payload
            texts += [d for t in texts[-1:] for d in decoded_payloads(t)]
        shown = text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + "..."
        hit = next((t.label for t in targets if any(reached(x, t) for x in texts)), None)
        if hit is not None:
            flags.append(f"{name} tried to reach {hit} outside the browser tools: {shown}")
        elif _DECODE.search(text) and _RUN.search(text):
            flags.append(f"{name} ran a decoded payload (what it does is not read here): {shown}")
    return flags
