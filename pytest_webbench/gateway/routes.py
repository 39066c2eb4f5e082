"""The gateway's per-trial routes: `/gateway/<trial>/<the API's own path>`.

An agent is given `<base>/gateway/<trial>` as its provider's base URL and the trial's token as its
API key. A request whose key is not the trial's token is refused and never forwarded; so is one the
run's protocol does not need (policy.py: its endpoints, its model, no provider-side state or tools,
8 MB at most), and one past the trial's caps, each in the API's own error shape. The rest go to the
upstream (the provider, or `--model-base-url`) with the allowlisted headers and the real key, which
only this process holds, one request of a trial at a time (so concurrent requests cannot pass a cap
together: a trial overshoots it by one request at most), and the reply streams back chunk by chunk
as it arrives while its usage and the tool calls it asks for are read on the way: the model log is
the transcript of record.

The hop is kept thin because it sits in front of every model turn: a bare ASGI app rather than a
framework's request and response objects, and aiohttp rather than httpx as the client. Side by
side in one run (README, Performance), a Starlette route with httpx added 1.31 ms to a small
streamed reply, a bare ASGI app with httpx 1.18 ms, this one 0.67 ms, and a forwarder doing none
of the gateway's own work (token, caps, usage, log) 0.44 ms.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.request import getproxies, proxy_bypass

from ..proxy.upstream import expand_env_refs
from .meter import ModelLog, Reservation, TrialMeter, redact
from .policy import (
    MAX_BODY_BYTES, Refused, check_body, check_path, forwarded_headers, input_bound, output_floor, output_limit_field,
)
from .protocols import Api, StreamReader, api_of, invalid_request, refusal, unauthorized

if TYPE_CHECKING:  # the client stack (~165 ms to import) loads with the first forwarded request:
    import aiohttp  # a run whose agents call no model never imports it
    import yarl

# Hop-by-hop and rewritten reply headers: never passed back.
DROPPED_RESPONSE = {b"content-length", b"transfer-encoding", b"connection", b"keep-alive"}
REQUEST_HEAD_CHARS = 2000
PREFIX = "/gateway/"
MAX_OPEN_BODIES = 4
FREE_PATHS = ("count_tokens",)  # Messages' token count: free, and no reply to meter


@dataclass
class GatewayRoute:
    trial: str
    token: str  # the agent's API key: this trial's, worthless anywhere else
    upstream: str  # base URL the API path is appended to
    auth: dict[str, str]  # headers carrying the real key; values may name variables as ${NAME}
    meter: TrialMeter
    log: ModelLog
    api: Api | None = None  # the run's protocol: its endpoints only (None: the path says, as a test's stand-in)
    model: str | None = None  # the run's model as the API names it: no other is forwarded (None: any)
    turn: asyncio.Lock = field(default_factory=asyncio.Lock)  # one request of the trial in flight
    # requests of the trial holding a body (read or being read): the rest wait unread, their bytes in
    # the kernel's socket buffers, so one trial holds MAX_OPEN_BODIES x MAX_BODY_BYTES at most
    bodies: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(MAX_OPEN_BODIES))


def _given_key(headers: list[tuple[bytes, bytes]]) -> str | None:
    bearer = key = None
    for name, value in headers:
        if name == b"authorization":
            bearer = value.decode("latin-1")
        elif name == b"x-api-key":
            key = value.decode("latin-1")
    if bearer is not None and bearer[:7].lower() == "bearer ":
        return bearer[7:].strip()
    return key


class GatewayRoutes:
    """The gateway as an ASGI app (`app`, or `handles(path)` + `app` behind a dispatcher)."""

    def __init__(self, timeout: float = 600) -> None:
        self.routes: dict[str, GatewayRoute] = {}
        self.timeout = timeout
        self._client: aiohttp.ClientSession | None = None
        self._proxies: dict[str, tuple[yarl.URL | None, aiohttp.BasicAuth | None]] = {}

    @staticmethod
    def handles(path: str) -> bool:
        return path.startswith(PREFIX)

    def add(self, route: GatewayRoute) -> str:
        self.routes[route.trial] = route
        return f"/gateway/{route.trial}"

    async def idle(self, trial: str, timeout: float) -> bool:
        """Waits until the trial's request in flight (one the agent may have left) has been read to
        its end and metered; False if it was still going after `timeout` (its reservation then
        stays counted: `TrialMeter.charged_usd`)."""
        route = self.routes.get(trial)
        if route is None:
            return True
        try:
            async with asyncio.timeout(timeout):
                async with route.turn:
                    return True
        except TimeoutError:
            return False

    def remove(self, trial: str) -> GatewayRoute | None:
        route = self.routes.pop(trial, None)
        if route is not None:
            route.log.close()
        return route

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()

    async def app(self, scope: dict, receive, send) -> None:
        if scope["type"] == "lifespan":  # served alone (tests, the benchmark)
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        trial, _, path = scope["path"][len(PREFIX):].partition("/") if self.handles(scope["path"]) else ("", "", "")
        if scope["type"] == "websocket":
            await _no_websocket(scope, send)
            return
        if not trial or not path:
            await _json(send, 404, {"error": {"message": "not a gateway route: /gateway/<trial>/<API path>"}})
            return
        route = self.routes.get(trial)
        if route is None:
            await _json(send, 404, {"error": {"message": "no such trial (it has ended or never started)"}})
            return
        api = route.api or api_of(path)
        fields = dict(trial=route.trial, api=api, path="/" + path[:500], request_bytes=0)
        if _given_key(scope["headers"]) != route.token:  # before the body is read: a stranger costs nothing
            status, payload = unauthorized(api, "this key is not this trial's (the gateway refuses it)")
            route.log.write(status=status, decision="unauthorized", **fields)
            await _json(send, status, payload)
            return
        async with route.bodies:
            await self._request(scope, receive, send, route, path, api, fields)

    async def _request(self, scope: dict, receive, send, route: GatewayRoute, path: str, api: Api, fields: dict) -> None:
        try:
            if route.api is not None:
                check_path(api, scope["method"], scope.get("raw_path") or scope["path"].encode(), path,
                           scope.get("query_string") or b"")
            body = await _body(receive, MAX_BODY_BYTES)
            fields["request_bytes"] = len(body)
            request = check_body(api, body, route.model)
            floor = output_floor(api, request)
        except Refused as exc:
            route.log.write(status=exc.status, decision="refused_request", detail=str(exc)[:500], **fields)
            await _json(send, exc.status, invalid_request(api, str(exc)))
            return
        async with route.turn:  # the cap is checked and the reply counted before the next request goes
            why = route.meter.over_cap()
            free = path.endswith(FREE_PATHS)  # counting tokens produces none: nothing to reserve or rewrite
            limit_field = None if free else output_limit_field(api, request)
            if why is None:
                reservation = Reservation(0.0, 0, 0, None) if free else route.meter.reserve(
                    input_bound(api, request, len(body)), _limit_of(request, limit_field), floor)
                if isinstance(reservation, str):
                    why = reservation
            if why is not None:
                message = f"Budget has been exceeded! {why} (webbench trial cap): the run is over, give your answer now"
                status, payload, headers = refusal(api, message)
                route.meter.refuse()
                route.log.write(status=status, decision="refused", detail=why, model=_model_of(body), **fields)
                await _json(send, status, payload, [(k.encode(), v.encode()) for k, v in headers.items()])
                return
            try:
                if limit_field is not None and reservation.output_limit is not None \
                        and reservation.output_limit != request.get(limit_field):
                    # the request's output limit lowered (or set) to what the caps leave: the bytes sent
                    # are the object the policy read, written again (ASCII: a lone surrogate's escape stays one)
                    fields["detail"] = f"{limit_field} {request.get(limit_field)} -> {reservation.output_limit} (the trial's caps)"
                    body = json.dumps({**request, limit_field: reservation.output_limit}, allow_nan=False).encode()
            except BaseException:
                route.meter.release(reservation)
                raise
            await self._forward(scope, receive, send, route, body, path, api, fields, reservation)

    def _session(self) -> aiohttp.ClientSession:
        import aiohttp

        if self._client is None:
            # As httpx did: certificates from SSL_CERT_FILE or SSL_CERT_DIR, else certifi's bundle
            # (a Python without system certificates still works); proxies: `_proxy_for`.
            self._client = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=self.timeout),
                connector=aiohttp.TCPConnector(ssl=_tls_context()),
                auto_decompress=False)  # usage is read from the reply's own bytes
        return self._client

    def _proxy_for(self, upstream: str) -> tuple[yarl.URL | None, aiohttp.BasicAuth | None]:
        """The environment's proxy for an upstream, as httpx read it: HTTPS_PROXY or HTTP_PROXY by
        the upstream's scheme, else ALL_PROXY; a value without a scheme is http://; none where
        NO_PROXY names the host. Looked up once per upstream: aiohttp's own trust_env reads the
        environment and ~/.netrc on every request (0.4 ms of the hop, measured)."""
        if upstream not in self._proxies:
            import aiohttp
            import yarl

            url = yarl.URL(upstream)
            proxies = getproxies()  # the environment's *_PROXY, by lower-cased scheme
            value = None if url.host and proxy_bypass(url.host) else proxies.get(url.scheme) or proxies.get("all")
            if not value:
                self._proxies[upstream] = (None, None)
            else:
                proxy = yarl.URL(value if "://" in value else "http://" + value)
                auth = aiohttp.BasicAuth(proxy.user, proxy.password or "") if proxy.user else None
                self._proxies[upstream] = (proxy.with_user(None), auth)
        return self._proxies[upstream]

    async def _forward(self, scope: dict, receive, send, route: GatewayRoute, body: bytes, path: str, api: str,
                       fields: dict, reservation: Reservation) -> None:
        try:
            await self._forward_reserved(scope, receive, send, route, body, path, api, fields, reservation)
        finally:
            if not reservation.settled:
                route.meter.release(reservation)  # never reached the provider

    async def _forward_reserved(self, scope: dict, receive, send, route: GatewayRoute, body: bytes, path: str,
                                api: str, fields: dict, reservation: Reservation) -> None:
        import aiohttp  # loaded with the first request forwarded (see the imports above)

        headers, dropped = forwarded_headers(scope["headers"])
        started = time.perf_counter()
        try:
            real = {k: expand_env_refs(v) for k, v in route.auth.items()}
        except KeyError as exc:  # the harness holds no key for this provider: a clear 502, never a crash
            await self._upstream_error(send, route, RuntimeError(str(exc.args[0])), [route.token], started, fields)
            return
        headers += [*real.items(), ("accept-encoding", "identity")]
        query = scope.get("query_string") or b""
        url = route.upstream.rstrip("/") + "/" + path + (f"?{query.decode('latin-1')}" if query else "")
        secrets = [route.token, *real.values()]
        fields.update(model=_model_of(body), request_head=redact(body[:REQUEST_HEAD_CHARS].decode("utf-8", "replace"), secrets))
        try:
            proxy, proxy_auth = self._proxy_for(route.upstream)
            request = self._session().request(
                scope["method"], url, data=body or None, headers=headers, allow_redirects=False, proxy=proxy,
                proxy_auth=proxy_auth, skip_auto_headers=("User-Agent", "Content-Type"))
        except (ValueError, OSError) as exc:  # a malformed proxy, a missing SSL_CERT_FILE: one clear 502 a turn
            await self._upstream_error(send, route, exc, secrets, started, fields)
            return
        # The agent may leave at any time, before the reply's head too (a whole JSON reply comes
        # only once the model is done). The provider bills the reply all the same, so it is read to
        # its end and metered whatever the agent does; only sending it on stops.
        watcher = asyncio.ensure_future(_disconnected(receive))
        first, size, ending = None, 0, "the upstream's reply broke off"
        try:
            try:
                upstream = await request
            except Exception as exc:  # aiohttp's errors, a timeout, or anything else of the client's
                await self._upstream_error(send, route, exc, secrets, started, fields)
                return
            if dropped:
                _note(fields, f"anthropic-beta not passed on: {', '.join(dropped)[:300]}")
            content_type = upstream.headers.get("content-type", "").partition(";")[0].strip()
            reader = StreamReader(api, content_type == "text/event-stream" and not upstream.headers.get("content-encoding"))
            passed = [(k, v) for k, v in upstream.raw_headers if k.lower() not in DROPPED_RESPONSE]
            try:
                if not _left(watcher):
                    await send({"type": "http.response.start", "status": upstream.status, "headers": passed})
                async for chunk in upstream.content.iter_any():
                    if first is None:
                        first = time.perf_counter()
                    size += len(chunk)
                    if not _left(watcher):
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
                    reader.feed(chunk)  # after the send: the agent has the chunk while its usage is read
                ending = None
            except (aiohttp.ClientError, asyncio.TimeoutError):
                pass  # the upstream broke off
            except asyncio.CancelledError:
                ending = "the run stopped mid-reply"
                raise
            finally:
                upstream.release()
                elapsed = time.perf_counter() - started
                usage = reader.close()
                reservation.settled = True
                cost = route.meter.settle(reservation, usage, elapsed, billed=200 <= upstream.status < 300)
                if provider_fault(upstream.status):  # the harness's own evidence that the provider failed the agent
                    route.meter.provider_failed()
                if _left(watcher):
                    ending = "the agent left mid-reply, the reply read to its end and metered" if ending is None else \
                        f"the agent left mid-reply; {ending}"
                    if first is None:
                        ending = "the agent left before the reply began, the reply read to its end and metered"
                detail = "; ".join(d for d in (fields.pop("detail", None), usage.fault, ending) if d) or None
                # logged before the reply ends, so a line is there once its agent has the reply
                route.log.write(status=upstream.status, decision="forwarded", latency_ms=elapsed * 1000,
                                ttft_ms=None if first is None else (first - started) * 1000, input_tokens=usage.input,
                                cached_tokens=usage.cached, output_tokens=usage.output, reasoning_tokens=usage.reasoning,
                                usage_reported=usage.reported, usage_estimated=usage.estimated, cost_usd=cost,
                                response_bytes=size, detail=detail, tool_calls=reader.calls.close(),
                                reply_text=reader.calls.text or None, **fields)
        finally:
            watcher.cancel()
        if ending is None and not _left(watcher):
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        # else the reply stays unfinished, so the server drops the connection: the agent sees its
        # reply end short, as it would directly, not a clean end to a truncated stream

    @staticmethod
    async def _upstream_error(send, route: GatewayRoute, exc: BaseException, secrets: list[str], started: float,
                              fields: dict) -> None:
        route.meter.provider_failed()
        fields = dict(fields)
        _note(fields, redact(f"{type(exc).__name__}: {exc}", secrets)[:500])
        route.log.write(status=502, decision="upstream_error", latency_ms=(time.perf_counter() - started) * 1000, **fields)
        await _json(send, 502, {"error": {"message": f"the model API could not be reached: {type(exc).__name__}"}})


# Replies that say the provider failed, or refused the harness's key or its rate: never a 400, 404,
# 413 or 422, which the agent's own body can bring about at will (verdict.py charges those to it).
PROVIDER_FAULTS = frozenset({401, 402, 403, 408, 429})


def provider_fault(status: int) -> bool:
    return status >= 500 or status in PROVIDER_FAULTS


def _note(fields: dict, text: str) -> None:
    """Adds to the log line's detail, beside what is there (a rewritten limit's note)."""
    fields["detail"] = "; ".join(d for d in (fields.get("detail"), text) if d)


def _left(watcher: asyncio.Future) -> bool:
    return watcher.done() and not watcher.cancelled()


def _tls_context() -> ssl.SSLContext:
    import certifi

    cafile, capath = os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")
    if cafile or capath:
        return ssl.create_default_context(cafile=cafile, capath=capath)
    return ssl.create_default_context(cafile=certifi.where())


async def _body(receive, limit: int) -> bytes:
    chunks, size = [], 0
    while True:
        message = await receive()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise Refused(f"the request body is over {limit} bytes", 413)
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


async def _disconnected(receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _json(send, status: int, payload: dict, headers: list[tuple[bytes, bytes]] = ()) -> None:
    body = json.dumps(payload).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})


async def _no_websocket(scope: dict, send) -> None:
    """Codex first tries a WebSocket to the Responses API; a 426 sends it to plain HTTP at once
    (any other answer costs it five retries, ~6 s a trial: docs/research)."""
    if "websocket.http.response" in scope.get("extensions", {}):
        await send({"type": "websocket.http.response.start", "status": 426, "headers": [(b"upgrade", b"websocket")]})
        await send({"type": "websocket.http.response.body", "body": b""})
    else:
        await send({"type": "websocket.close", "code": 1008})


def _limit_of(request: dict, field: str | None) -> int | None:
    value = request.get(field) if field else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _model_of(body: bytes) -> str | None:
    try:
        model = json.loads(body).get("model")
    except (ValueError, AttributeError):
        return None
    return model if isinstance(model, str) else None
