"""Kernel's API and its hosted MCP server, as stand-ins in one process, each answering after a
set latency (a cloud API's round trip): for runs that play Kernel at scale (benchmarks/xdist_scaling.py).

    python tests/support/kernel_services.py --key KEY --latency 0.2 --port-file FILE

FILE gets `<api port> <mcp port>` once both listen.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
import tempfile
from pathlib import Path

import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_api_standin import KernelApiStandin  # noqa: E402
from kernel_standin import build_standin  # noqa: E402


def delayed(app, latency: float):
    async def wrapped(scope, receive, send):
        if scope["type"] == "http" and latency:
            await asyncio.sleep(latency)
        await app(scope, receive, send)
    return wrapped


def _listening() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    return sock


async def serve(key: str, latency: float, port_file: Path) -> None:
    api = KernelApiStandin(key)
    mcp = build_standin(Path(tempfile.mkdtemp()) / "calls.jsonl").streamable_http_app(json_response=True, stateless_http=True)
    socks = [_listening(), _listening()]
    servers = [uvicorn.Server(uvicorn.Config(delayed(app, latency), log_level="warning", lifespan="on" if app is mcp else "off"))
               for app in (api.app, mcp)]
    tasks = [asyncio.create_task(server.serve(sockets=[sock])) for server, sock in zip(servers, socks)]
    tmp = port_file.with_suffix(".tmp")
    tmp.write_text(" ".join(str(s.getsockname()[1]) for s in socks))
    tmp.rename(port_file)
    await asyncio.gather(*tasks)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--key", required=True)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--port-file", type=Path, required=True)
    args = parser.parse_args()
    asyncio.run(serve(args.key, args.latency, args.port_file))


if __name__ == "__main__":
    main()
