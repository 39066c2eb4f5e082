"""A write task's site door, on the local backend: where the harness forwards the trial's
Chromium to a site's port (environments/seal.py `Exits`), each HTTP request is read whole (h11,
a kept HTTP/1.1 parser, not one of our own) and put to the trial's matcher before a byte of it
reaches the site. Whatever made the request (a page, any worker, a keepalive as a page closed, a
redirect's next hop, code of the agent's), it passes here. A blocked request gets a 403 from the
harness; the rest are sent on as read, framed anew (one Content-Length), so the site reads the
bytes the matcher read and nothing else. The site is known by its port: any name for the
loopback (127.0.0.1, localhost, a trailing dot) reaches the same site and is read as it.

Refused outright, and kept: a body past the matcher's bound, a protocol upgrade (a WebSocket's
frames are a channel the matcher cannot read), a request h11 cannot parse."""

from __future__ import annotations

import asyncio
import contextlib

import h11

from ..grading.write_match import MAX_READ_BODY, READ_ONLY_METHODS, Decision
from .interception import Interception

READ_CHUNK = 65536


async def _next_event(conn: h11.Connection, reader: asyncio.StreamReader):
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(await reader.read(READ_CHUNK))
            continue
        return event


async def _read_request(conn: h11.Connection, reader: asyncio.StreamReader):
    """The next request and its whole body (None for the body past the bound); None at the end."""
    event = await _next_event(conn, reader)
    if isinstance(event, h11.ConnectionClosed):
        return None
    if not isinstance(event, h11.Request):
        raise h11.RemoteProtocolError(f"expected a request, got {type(event).__name__}")
    body, size = bytearray(), 0
    while not isinstance(part := await _next_event(conn, reader), h11.EndOfMessage):
        if isinstance(part, h11.Data):
            size += len(part.data)
            if size <= MAX_READ_BODY:
                body += part.data
    return event, (bytes(body) if size <= MAX_READ_BODY else None)


def _refusal(conn: h11.Connection, status: int, why: str) -> bytes:
    text = f"blocked by the benchmark harness: {why}\n".encode()
    return (conn.send(h11.Response(status_code=status, headers=[("content-type", "text/plain; charset=utf-8"),
                                                                ("content-length", str(len(text))),
                                                                ("connection", "close")]))
            + conn.send(h11.Data(data=text)) + conn.send(h11.EndOfMessage()))


async def guarded_relay(interception: Interception, port: int, reader: asyncio.StreamReader,
                        writer: asyncio.StreamWriter, up_reader: asyncio.StreamReader,
                        up_writer: asyncio.StreamWriter) -> None:
    """One browser connection to the site at `port`, request by request (see the module)."""
    browser, site = h11.Connection(h11.SERVER), h11.Connection(h11.CLIENT)
    host = interception.matcher.site_hosts.get(port, "127.0.0.1")
    try:
        while (got := await _read_request(browser, reader)) is not None:
            request, body = got
            method, target = request.method.decode("latin-1"), request.target.decode("latin-1")
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in request.headers}
            types = [v.decode("latin-1") for k, v in request.headers if k.lower() == b"content-type"]  # a site may read any
            url = f"http://{host}:{port}{target}"
            if body is None or "upgrade" in headers:
                why = "a body past the harness's bound" if body is None else "a protocol upgrade"
                interception.record(Decision(True, "refused", False, how=why), method, url, None, "site")
                writer.write(_refusal(browser, 413 if body is None else 403, why))
                break
            codings = ",".join(v.decode("latin-1") for k, v in request.headers if k.lower() == b"content-encoding")
            if interception.agent_ended and method.upper() in READ_ONLY_METHODS:  # the harness's own reads
                decision = Decision(False, "pass", False)
            elif interception.agent_ended:
                decision = Decision(True, "after_end", False)
            else:
                decision = await interception.decide(method, url, body, types, codings)
            interception.record(decision, method, url, body, "site")
            if decision.block:
                writer.write(_refusal(browser, 403, "a write task's submission never reaches the site"))
                break
            kept = [(k, v) for k, v in request.headers if k.lower() not in (b"content-length", b"transfer-encoding")]
            if body or method not in ("GET", "HEAD", "OPTIONS"):
                kept.append((b"content-length", str(len(body)).encode()))
            up_writer.write(site.send(h11.Request(method=request.method, target=request.target, headers=kept,
                                                  http_version=request.http_version)))
            up_writer.write(site.send(h11.Data(data=body)) if body else b"")
            up_writer.write(site.send(h11.EndOfMessage()))
            await up_writer.drain()
            while True:  # the site's answer, streamed back as it comes
                event = await _next_event(site, up_reader)
                if isinstance(event, h11.ConnectionClosed):
                    return
                writer.write(browser.send(event) or b"")
                await writer.drain()
                if isinstance(event, h11.EndOfMessage):
                    break
            if browser.our_state is h11.MUST_CLOSE or site.our_state is h11.MUST_CLOSE or site.their_state is h11.MUST_CLOSE:
                break
            browser.start_next_cycle()
            site.start_next_cycle()
    except asyncio.CancelledError:
        pass
    except Exception:  # noqa: BLE001 - a connection broken off, bytes h11 will not read or send: it ends here, closed
        pass
    finally:
        for w in (writer, up_writer):
            with contextlib.suppress(Exception):
                w.close()
