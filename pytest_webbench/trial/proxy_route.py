"""One trial's route through the MCP call proxy: the session that filters, rejects and logs the
agent's browser calls, and what the record takes from it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..design.suite import TrialSpec
from ..proxy.log import CallLog, read_call_log
from ..proxy.relay import ProxySession
from ..proxy.upstream import HttpUpstream
from ..results.records import BrowserCalls
from .services import RunServices


@dataclass
class ProxyHandle:
    url: str
    session: ProxySession
    log_path: Path

    def calls(self) -> BrowserCalls:
        contents = read_call_log(self.log_path)
        rejected: dict[str, int] = {}
        for rec in contents.records:
            if rec.decision == "rejected" and rec.rule:
                rejected[rec.rule] = rejected.get(rec.rule, 0) + 1
        stats = self.session.stats
        tool_sec = sum(r.latency_ms for r in contents.records if r.decision == "forwarded" and r.method == "tools/call") / 1000
        return BrowserCalls(
            forwarded=stats.forwarded_calls, rejected=stats.rejected_calls, cap_hit=stats.cap_hits > 0, tool_sec=round(tool_sec, 6),
            rejected_rules=rejected, webmcp_invokes=dict(stats.webmcp_invokes),
            unreadable_log_lines=contents.unreadable_lines, upstream_failures=stats.upstream_failures,
        )


def open_proxy_route(services: RunServices, spec: TrialSpec, session_id: str, trial_dir: Path) -> ProxyHandle:
    log_path = trial_dir / "proxy-log.jsonl"
    from ..grading.evidence import answer_forms

    session = ProxySession(
        spec.policy, session_id, HttpUpstream(services.backend_mcp_url, services.upstream_headers), CallLog(log_path),
        trial=spec.trial_id, call_cap=spec.task.meta.turn_cap, watch=answer_forms(spec.task.meta),
    )
    path = services.routes.add(spec.trial_id, session)
    return ProxyHandle(services.proxy_base_url + path, session, log_path)
