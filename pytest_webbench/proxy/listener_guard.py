"""The listener's guard against DNS rebinding and cross-site requests, for the proxy's routes and
the gateway's alike (they share one listener, an agent's one exit).

A web page can make a browser send requests to 127.0.0.1 under a name it controls (DNS
rebinding), and can POST across origins without a preflight if the body is `text/plain`. So, as
MCP's streamable-HTTP transport requires: a request whose Host is not a name this listener is
reached by is answered 421, one that carries an Origin of another host 403, before any route sees
it. The names are the loopback's, the listening address's, and the host of `--proxy-url`.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


def host_name(value: str) -> str:
    """`127.0.0.1:8000` -> `127.0.0.1`, `[::1]:80` -> `::1`; lowercased."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:].split("]", 1)[0]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def allowed_hosts(listen_host: str, *urls: str | None) -> frozenset[str]:
    names = set(LOOPBACK)
    if listen_host not in ("", "0.0.0.0", "::"):
        names.add(host_name(listen_host))
    names |= {(urlsplit(u).hostname or "").lower() for u in urls if u}
    return frozenset(names - {""})


def _refusal(status: int, text: str) -> tuple[dict, bytes]:
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": text}}).encode()
    return ({"type": "http.response.start", "status": status,
             "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]}, body)


def guarded(app, hosts: frozenset[str]):
    """`app` behind the Host and Origin checks."""

    async def guard(scope: dict, receive, send) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            host = host_name(headers.get(b"host", b"").decode("latin-1"))
            origin = headers.get(b"origin")
            refusal = None
            if host not in hosts:
                refusal = _refusal(421, f"Host {host!r} is not a name of this listener")
            elif origin is not None and (urlsplit(origin.decode("latin-1")).hostname or "").lower() not in hosts:
                refusal = _refusal(403, f"Origin {origin.decode('latin-1')!r} is not allowed")
            if refusal is not None:
                start, body = refusal
                await send(start)
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return guard
