"""The gateway's per-trial routes: `/gateway/<trial>/<the API's own path>`.

An agent is given `<base>/gateway/<trial>` as its provider's base URL and the trial's token as its
API key. A request whose key is not the trial's token is refused and never forwarded; one past the
trial's caps is refused in the API's own error shape (protocols.refusal); the rest go to the
upstream (the provider, or `--model-base-url`) with the real key, which only this process holds,
and the reply streams back chunk by chunk as it arrives while its usage is read on the way.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from ..proxy.upstream import expand_env_refs
from .meter import ModelLog, TrialMeter, redact
from .protocols import StreamReader, api_of, refusal, unauthorized

# Hop-by-hop and rewritten headers: never passed on either way.
DROPPED_REQUEST = {"host", "authorization", "x-api-key", "content-length", "accept-encoding", "connection",
                   "transfer-encoding", "keep-alive", "upgrade"}
DROPPED_RESPONSE = {"content-length", "transfer-encoding", "connection", "keep-alive"}
REQUEST_HEAD_CHARS = 2000


@dataclass
class GatewayRoute:
    trial: str
    token: str  # the agent's API key: this trial's, worthless anywhere else
    upstream: str  # base URL the API path is appended to
    auth: dict[str, str]  # headers carrying the real key; values may name variables as ${NAME}
    meter: TrialMeter
    log: ModelLog


def _given_key(request: Request) -> str | None:
    bearer = request.headers.get("authorization", "")
    if bearer.lower().startswith("bearer "):
        return bearer[7:].strip()
    return request.headers.get("x-api-key")


class GatewayRoutes:
    def __init__(self, timeout: float = 600) -> None:
        self.routes: dict[str, GatewayRoute] = {}
        self.timeout = timeout
        self._client: httpx.AsyncClient | None = None
        self.app = Starlette(routes=self.starlette_routes())

    def starlette_routes(self) -> list:
        return [Route("/gateway/{trial}/{path:path}", self._endpoint, methods=["GET", "POST"]),
                WebSocketRoute("/gateway/{trial}/{path:path}", self._no_websocket)]

    @staticmethod
    async def _no_websocket(websocket: WebSocket) -> None:
        """Codex first tries a WebSocket to the Responses API; a 426 sends it to plain HTTP at once
        (any other answer costs it five retries, ~6 s a trial: docs/research)."""
        await websocket.send_denial_response(Response(status_code=426, headers={"upgrade": "websocket"}))

    def add(self, route: GatewayRoute) -> str:
        self.routes[route.trial] = route
        return f"/gateway/{route.trial}"

    def remove(self, trial: str) -> GatewayRoute | None:
        route = self.routes.pop(trial, None)
        if route is not None:
            route.log.close()
        return route

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()

    async def _endpoint(self, request: Request) -> Response:
        route = self.routes.get(request.path_params["trial"])
        path = request.path_params["path"]
        api = api_of(path)
        if route is None:
            return JSONResponse({"error": {"message": "no such trial (it has ended or never started)"}}, status_code=404)
        body = await request.body()
        fields = dict(trial=route.trial, api=api, path="/" + path, request_bytes=len(body), model=_model_of(body))
        if _given_key(request) != route.token:
            status, payload = unauthorized(api, "this key is not this trial's (the gateway refuses it)")
            route.log.write(status=status, decision="unauthorized", **fields)
            return JSONResponse(payload, status_code=status)
        if (why := route.meter.over_cap()) is not None:
            message = f"Budget has been exceeded! {why} (webbench trial cap): the run is over, give your answer now"
            status, payload, headers = refusal(api, message)
            route.meter.refuse()
            route.log.write(status=status, decision="refused", detail=why, **fields)
            return JSONResponse(payload, status_code=status, headers=headers)
        return await self._forward(request, route, body, path, api, fields)

    async def _forward(self, request: Request, route: GatewayRoute, body: bytes, path: str, api: str, fields: dict) -> Response:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=httpx.Timeout(self.timeout, connect=30))
        headers = {k: v for k, v in request.headers.items() if k.lower() not in DROPPED_REQUEST}
        real = {k: expand_env_refs(v) for k, v in route.auth.items()}
        headers.update(real)
        headers["accept-encoding"] = "identity"  # usage is read from the reply's own bytes
        url = route.upstream.rstrip("/") + "/" + path + (f"?{request.url.query}" if request.url.query else "")
        secrets = [route.token, *real.values()]
        fields["request_head"] = redact(body[:REQUEST_HEAD_CHARS].decode("utf-8", "replace"), secrets)
        started = time.perf_counter()
        try:
            upstream = await self._client.send(self._client.build_request(request.method, url, content=body, headers=headers),
                                               stream=True)
        except httpx.HTTPError as exc:
            route.log.write(status=502, decision="upstream_error", detail=redact(str(exc), secrets)[:500],
                            latency_ms=(time.perf_counter() - started) * 1000, **fields)
            return JSONResponse({"error": {"message": f"the model API could not be reached: {type(exc).__name__}"}},
                                status_code=502)
        event_stream = upstream.headers.get("content-type", "").partition(";")[0].strip() == "text/event-stream"
        reader = StreamReader(api, event_stream and not upstream.headers.get("content-encoding"))
        meter, log = route.meter, route.log

        async def relay() -> AsyncIterator[bytes]:
            first, size = None, 0
            try:
                async for chunk in upstream.aiter_raw():
                    if first is None:
                        first = time.perf_counter()
                    size += len(chunk)
                    reader.feed(chunk)
                    yield chunk
            finally:
                await upstream.aclose()
                elapsed = time.perf_counter() - started
                usage = reader.close()
                cost = meter.account(usage, elapsed)
                log.write(status=upstream.status_code, decision="forwarded", latency_ms=elapsed * 1000,
                          ttft_ms=None if first is None else (first - started) * 1000, input_tokens=usage.input,
                          cached_tokens=usage.cached, output_tokens=usage.output, reasoning_tokens=usage.reasoning,
                          usage_reported=usage.reported, cost_usd=cost, response_bytes=size, **fields)

        passed = {k: v for k, v in upstream.headers.items() if k.lower() not in DROPPED_RESPONSE}
        return StreamingResponse(relay(), status_code=upstream.status_code, headers=passed)


def _model_of(body: bytes) -> str | None:
    try:
        model = json.loads(body).get("model")
    except (ValueError, AttributeError):
        return None
    return model if isinstance(model, str) else None
