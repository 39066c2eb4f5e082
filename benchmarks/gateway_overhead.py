"""What the model gateway adds to a model request, measured side by side in one run.

A local model server streams a small Responses-API reply (three SSE events, usage in the last);
the same request goes to it directly and through the gateway (a trial route: token check, real
key swapped in, the stream passed on chunk by chunk while its usage is read, a model-log line),
alternating, so drift and noise hit both. Measured per request: time to the reply's first byte
(TTFT) and to its end, over one kept-alive connection each, as a CLI holds one.

    .venv/bin/python benchmarks/gateway_overhead.py [--rounds 400]

Target (issue 16): the gateway adds under 1 ms at the median, to TTFT and to a whole small reply.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import tempfile
import time
from pathlib import Path

import httpx
from starlette.applications import Starlette
from starlette.responses import StreamingResponse
from starlette.routing import Route

from pytest_webbench.gateway.meter import ModelLog, Price, TrialMeter
from pytest_webbench.gateway.routes import GatewayRoute, GatewayRoutes
from pytest_webbench.service import ServiceLoop

EVENTS = [
    b'event: response.created\ndata: {"type":"response.created","response":{"id":"r1","status":"in_progress"}}\n\n',
    b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"{\\"price\\": 17.49}"}\n\n',
    b'event: response.completed\ndata: {"type":"response.completed","response":{"id":"r1","status":"completed",'
    b'"usage":{"input_tokens":1200,"input_tokens_details":{"cached_tokens":300},"output_tokens":40}}}\n\n',
]
BODY = {"model": "gpt-bench", "stream": True, "input": [{"role": "user", "content": "hi"}]}


async def responses(request):
    await request.body()

    async def stream():
        for event in EVENTS:
            yield event
    return StreamingResponse(stream(), media_type="text/event-stream")


def timed(client: httpx.Client, url: str, headers: dict) -> tuple[float, float]:
    started = time.perf_counter()
    first = None
    with client.stream("POST", url, json=BODY, headers=headers) as reply:
        for _ in reply.iter_raw():
            if first is None:
                first = time.perf_counter()
    return (first - started) * 1000, (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=400)
    args = parser.parse_args()
    os.environ["WEBBENCH_BENCH_KEY"] = "sk-bench"
    loop = ServiceLoop()
    upstream = loop.serve(Starlette(routes=[Route("/v1/responses", responses, methods=["POST"])]), "model")
    routes = GatewayRoutes()
    gateway = loop.serve(routes.app, "gateway")
    with tempfile.TemporaryDirectory() as tmp:
        route = GatewayRoute(trial="bench", token="wbt-bench", upstream=upstream + "/v1",
                             auth={"authorization": "Bearer ${WEBBENCH_BENCH_KEY}"},
                             meter=TrialMeter(trial="bench", price=Price(1e-6, 1e-5)), log=ModelLog(Path(tmp) / "model-log.jsonl"))
        routes.add(route)
        direct, through = httpx.Client(), httpx.Client()
        targets = [(direct, upstream + "/v1/responses", {"authorization": "Bearer sk-bench"}),
                   (through, gateway + "/gateway/bench/responses", {"authorization": "Bearer wbt-bench"})]
        for client, url, headers in targets * 20:  # warm both paths
            timed(client, url, headers)
        samples: dict[str, list[tuple[float, float]]] = {"direct": [], "gateway": []}
        for i in range(args.rounds):
            order = targets if i % 2 == 0 else targets[::-1]
            for client, url, headers in order:
                samples["direct" if client is direct else "gateway"].append(timed(client, url, headers))
        assert route.meter.usage.input == 1200 * (args.rounds + 20)  # every reply was metered
    loop.run(routes.aclose())
    loop.close()
    print(f"# gateway overhead, {datetime.date.today()}, {os.cpu_count()} cores, {args.rounds} alternating rounds")
    print("| measure | direct (median) | through the gateway (median) | added: median | added: p90 |")
    print("|---|---|---|---|---|")
    for index, name in ((0, "time to first byte"), (1, "whole reply (3 SSE events)")):
        d = [s[index] for s in samples["direct"]]
        g = [s[index] for s in samples["gateway"]]
        added = sorted(gv - dv for gv, dv in zip(g, d))
        print(f"| {name} | {statistics.median(d):.2f} ms | {statistics.median(g):.2f} ms | "
              f"{statistics.median(added):.2f} ms | {added[int(0.9 * len(added))]:.2f} ms |")


if __name__ == "__main__":
    main()
