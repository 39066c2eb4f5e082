"""The proxy in standalone stdio mode, for agents that start their MCP server themselves.

    python -m pytest_webbench.proxy --arm ARM --session-id ID [--call-cap N] --log FILE
        (--upstream-url URL [--upstream-header 'Name: value']... | -- UPSTREAM_COMMAND ARG...)

MCP on stdin/stdout, one JSON-RPC message per line; diagnostics on stderr. The main thread reads
and decides and writes what it forwards; the upstream's reader finishes each call and answers
the agent, so a long browser call never holds up a ping or a cancellation, and replies are
written whole, one per line, in the order they finish. Threads rather than asyncio, and no
hand-offs between them: every extra wake-up costs more on these machines than everything else
the proxy does (benchmarks/proxy_overhead.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from pathlib import Path
from typing import BinaryIO

from ..design.arms import ARM_POLICIES, arm_policy
from .framing import MAX_LINE_BYTES, Oversized, message_bytes, read_lines
from .log import CallLog
from .relay import Answer, Call, ProxySession, Relay, failed_reply
from .upstream import HttpUpstream, StdioUpstream, expand_env_refs


class UsageError(Exception):
    pass


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    if "--" in argv:
        split = argv.index("--")
        argv, command = argv[:split], argv[split + 1:]
    else:
        command = []
    parser = argparse.ArgumentParser(
        prog="python -m pytest_webbench.proxy",
        description="MCP call proxy for one benchmark trial (stdio in front, HTTP or stdio behind).",
        epilog="Header values may name environment variables as ${NAME}; they are read at send time.",
    )
    parser.add_argument("--arm", required=True, choices=sorted(ARM_POLICIES))
    parser.add_argument("--session-id", required=True, help="the trial's browser session id")
    parser.add_argument("--call-cap", type=int, default=None, help="browser calls allowed before every further call is refused")
    parser.add_argument("--log", required=True, type=Path, help="JSON-lines call log to append to")
    parser.add_argument("--trial", default=None, help="trial id written into each log record (default: the session id)")
    parser.add_argument("--upstream-url", help="streamable-HTTP MCP server to forward to")
    parser.add_argument("--upstream-header", action="append", default=[], metavar="'Name: value'")
    parser.add_argument("--max-line-bytes", type=int, default=MAX_LINE_BYTES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if bool(args.upstream_url) == bool(command):
        parser.error("give exactly one upstream: --upstream-url URL, or -- UPSTREAM_COMMAND ARG...")
    if command and args.upstream_header:
        parser.error("--upstream-header only applies to --upstream-url")
    if args.call_cap is not None and args.call_cap < 0:
        parser.error("--call-cap must be >= 0")
    return args, command


def parse_headers(specs: list[str]) -> dict[str, str]:
    headers = {}
    for number, spec in enumerate(specs, 1):
        name, sep, value = spec.partition(":")
        if not sep or not name.strip():
            # Not echoed: a malformed header may well be a pasted secret.
            raise UsageError(f"--upstream-header number {number}: expected 'Name: value'")
        headers[name.strip()] = value.strip()
        try:
            expand_env_refs(value)  # fail now, naming the variable, not at the first call
        except KeyError as exc:
            raise UsageError(f"--upstream-header {name.strip()}: {exc.args[0]}") from None
    return headers


class StdoutWriter:
    def __init__(self, out: BinaryIO):
        self.out = out
        self._lock = threading.Lock()

    def write(self, message: dict) -> None:
        self.write_raw(message_bytes(message))  # one line, and a lone surrogate written as it came

    def write_raw(self, line: bytes) -> None:
        with self._lock:
            self.out.write(line + b"\n")
            self.out.flush()


def serve(session: ProxySession, upstream, stdin: BinaryIO, writer: StdoutWriter, max_line_bytes: int,
          drain_timeout: float = 300) -> None:
    """Runs until stdin ends, then until the calls in flight are answered (a client may close its
    side right after its last request). Calls finish on the upstream's side (its reader thread,
    or its HTTP pool), which answers the agent directly."""
    in_flight = 0
    settled = threading.Condition()

    def finisher(call: Call):
        nonlocal in_flight
        with settled:
            in_flight += 1

        def done(reply, raw: bytes | None = None) -> None:
            nonlocal in_flight
            try:
                answer = session.complete(call, reply)
                if raw is not None and not call.rewritten:
                    writer.write_raw(raw)  # passed through unchanged: no need to encode it again
                else:
                    writer.write(answer)
            except Exception as exc:  # a proxy bug must not take the agent's session down, nor leave it waiting
                writer.write(failed_reply(call, exc))
            finally:
                with settled:
                    in_flight -= 1
                    settled.notify_all()
        return done

    for line in read_lines(stdin, max_line_bytes):
        if isinstance(line, Oversized):
            step = Answer(session.refuse_oversized(line.size, line.head, max_line_bytes))
        else:
            step = session.receive_line(line)
        if isinstance(step, Answer):
            if step.reply is not None:
                writer.write(step.reply)
        elif isinstance(step, Relay):
            try:
                upstream.post(step.message)
            except Exception:
                pass  # nothing waits on a notification; the next call reports the dead upstream
        else:
            done = finisher(step)
            try:
                upstream.start_call(step.message, done, step.raw)
            except Exception as exc:
                done(exc)
    with settled:
        settled.wait_for(lambda: in_flight == 0, timeout=drain_timeout)


def run(args: argparse.Namespace, command: list[str]) -> int:
    writer = StdoutWriter(sys.stdout.buffer)
    if command:
        upstream: StdioUpstream | HttpUpstream = StdioUpstream(command, env=dict(os.environ), on_server_message=writer.write)
    else:
        upstream = HttpUpstream(args.upstream_url, parse_headers(args.upstream_header))
        upstream.on_server_message = writer.write
    log = CallLog(args.log)
    session = ProxySession(
        arm_policy(args.arm), args.session_id, upstream, log,
        trial=args.trial or args.session_id, call_cap=args.call_cap,
    )
    try:
        serve(session, upstream, sys.stdin.buffer, writer, args.max_line_bytes)
    finally:
        upstream.close_blocking()  # lets the calls in flight finish and be answered
        log.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    args, command = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return run(args, command)  # a bad header or unset variable stops it before anything starts
    except UsageError as exc:
        print(f"python -m pytest_webbench.proxy: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
