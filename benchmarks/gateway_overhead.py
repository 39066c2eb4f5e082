"""What the model gateway adds to a model request, measured side by side in one run.

Three processes, as in a real run: a stand-in model API (its own process, as the provider is
remote), the gateway served as a pytest process serves it (`ServiceLoop`, a trial route: token
check, real key swapped in, the stream passed on chunk by chunk while its usage is read, a
model-log line), and this one as the agent's CLI. The same request goes to the model directly and
through the gateway, alternating, so drift and noise hit both; each over one kept-alive
connection, as a CLI holds one. Measured per request: time to the reply's first byte (TTFT) and
to its end, for a small streamed Responses reply (three SSE events, usage in the last), with a
small request and with a 100 KB one (a conversation some turns in).

    .venv/bin/python benchmarks/gateway_overhead.py [--rounds 400]

Target (issue 16): the gateway adds under 1 ms at the median, to TTFT and to a whole small reply.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

EVENTS = [
    b'event: response.created\ndata: {"type":"response.created","response":{"id":"r1","status":"in_progress"}}\n\n',
    b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"{\\"price\\": 17.49}"}\n\n',
    b'event: response.completed\ndata: {"type":"response.completed","response":{"id":"r1","status":"completed",'
    b'"usage":{"input_tokens":1200,"input_tokens_details":{"cached_tokens":300},"output_tokens":40}}}\n\n',
]
SMALL = {"model": "gpt-bench", "stream": True, "input": [{"role": "user", "content": "hi"}]}
LARGE = {"model": "gpt-bench", "stream": True, "input": [
    {"role": "user" if i % 2 else "assistant", "content": f"turn {i}: " + "the page lists mugs and their prices " * 30}
    for i in range(90)]}


def serve_model() -> None:
    """The provider's stand-in: a bare ASGI app, so its own cost is small and the same both ways."""
    import uvicorn

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        for event in EVENTS:
            await send({"type": "http.response.body", "body": event, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)

    async def run():
        task = asyncio.ensure_future(server.serve())
        while not server.started:
            await asyncio.sleep(0.01)
        print(f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}", flush=True)
        await task

    asyncio.run(run())


def serve_gateway(upstream: str) -> None:
    """The gateway as a pytest process serves it; prints its route, then (stdin closed) the metered
    input tokens, so the run can check every reply was metered."""
    from pytest_webbench.gateway.meter import ModelLog, Price, TrialMeter
    from pytest_webbench.gateway.routes import GatewayRoute, GatewayRoutes
    from pytest_webbench.proxy.http_endpoint import ProxyRoutes
    from pytest_webbench.trial.services import _listener
    from pytest_webbench.service_loop import ServiceLoop

    os.environ["WEBBENCH_BENCH_KEY"] = "sk-bench"
    loop = ServiceLoop()
    routes = GatewayRoutes()
    url = loop.serve(_listener(ProxyRoutes(), routes), "proxy and gateway")  # the listener a run serves
    with tempfile.TemporaryDirectory() as tmp:
        route = GatewayRoute(trial="bench", token="wbt-bench", upstream=upstream + "/v1",
                             auth={"authorization": "Bearer ${WEBBENCH_BENCH_KEY}"},
                             meter=TrialMeter(trial="bench", price=Price(1e-6, 1e-5)), log=ModelLog(Path(tmp) / "model-log.jsonl"))
        routes.add(route)
        print(url + "/gateway/bench/responses", flush=True)
        sys.stdin.read()
        print(route.meter.usage.input, flush=True)
        loop.run(routes.aclose())
        loop.close()


def timed(client: httpx.Client, url: str, headers: dict, body: bytes) -> tuple[float, float]:
    started = time.perf_counter()
    first = None
    with client.stream("POST", url, content=body, headers=headers) as reply:
        for _ in reply.iter_raw():
            if first is None:
                first = time.perf_counter()
    return (first - started) * 1000, (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=400)
    parser.add_argument("--serve-model", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve-gateway", metavar="UPSTREAM", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_model:
        return serve_model()
    if args.serve_gateway:
        return serve_gateway(args.serve_gateway)
    me = [sys.executable, __file__]
    model = subprocess.Popen([*me, "--serve-model"], stdout=subprocess.PIPE, text=True)
    upstream = model.stdout.readline().strip()
    gateway = subprocess.Popen([*me, "--serve-gateway", upstream], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    route = gateway.stdout.readline().strip()
    direct, through = httpx.Client(), httpx.Client()
    targets = [("direct", direct, upstream + "/v1/responses", {"authorization": "Bearer sk-bench"}),
               ("gateway", through, route, {"authorization": "Bearer wbt-bench"})]
    bodies = {"small": json.dumps(SMALL).encode(), "large": json.dumps(LARGE).encode()}
    headers_json = {"content-type": "application/json"}
    samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
    sent = 0
    try:
        for size, body in bodies.items():
            for _ in range(20):  # warm both paths
                for _, client, url, headers in targets:
                    timed(client, url, {**headers, **headers_json}, body)
            for i in range(args.rounds):
                for name, client, url, headers in (targets if i % 2 == 0 else targets[::-1]):
                    samples.setdefault((size, name), []).append(timed(client, url, {**headers, **headers_json}, body))
            sent += 20 + args.rounds
    finally:
        metered, _ = gateway.communicate("", timeout=60)
        model.kill()
    assert int(metered.split()[-1]) == 1200 * sent, "a reply through the gateway was not metered"
    print(f"# gateway overhead, {datetime.datetime.now():%Y-%m-%d %H:%M}, {os.cpu_count()} cores, "
          f"{args.rounds} alternating rounds per request size")
    print("| request | measure | direct (median) | through the gateway (median) | added: median | added: p90 |")
    print("|---|---|---|---|---|---|")
    for size, label in (("small", "small (100 B)"), ("large", f"large ({len(bodies['large']) // 1000} KB)")):
        for index, measure in ((0, "time to first byte"), (1, "whole reply (3 SSE events)")):
            d = [s[index] for s in samples[(size, "direct")]]
            g = [s[index] for s in samples[(size, "gateway")]]
            added = sorted(gv - dv for gv, dv in zip(g, d))
            print(f"| {label} | {measure} | {statistics.median(d):.2f} ms | {statistics.median(g):.2f} ms | "
                  f"{statistics.median(added):.2f} ms | {added[int(0.9 * len(added))]:.2f} ms |")


if __name__ == "__main__":
    main()
