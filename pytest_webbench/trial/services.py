"""One pytest process's view of a run: the services its trials share.

Sites, the browser backend with its MCP server, and the proxy's endpoint start once per process
(per xdist worker) and are shared by every trial it runs.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass, field

from ..browsers.base import BrowserBackend
from ..planning.options import RunOptions
from ..gateway.routes import GatewayRoutes
from ..proxy.http_endpoint import ProxyRoutes
from ..proxy.listener_guard import LOOPBACK, allowed_hosts, guarded
from ..service_loop import ServiceLoop
from ..design.suite import LIVE_INBOX, Suite, SuiteError


def load_site_app(suite: Suite, site: str):
    """Imports a bundled site's `create_app()` from its file in the suite."""
    spec_path = suite.path / (suite.spec.sites[site].app or "")
    if str(spec_path.parent) not in sys.path:
        sys.path.insert(0, str(spec_path.parent))  # sites import their shared page shell
    spec = importlib.util.spec_from_file_location(f"webbench_site_{suite.name}_{site}".replace("-", "_"), spec_path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.create_app()


def _listener(routes: ProxyRoutes, gateway: GatewayRoutes, hosts: frozenset[str] | None = None):
    """One ASGI app for the proxy's routes and the gateway's: a sealed agent's one exit serves both,
    behind the Host and Origin checks (listener_guard.py)."""

    async def app(scope: dict, receive, send) -> None:
        if scope["type"] != "lifespan" and gateway.handles(scope["path"]):
            await gateway.app(scope, receive, send)
        else:
            await routes.app(scope, receive, send)
    return guarded(app, hosts or LOOPBACK)


@dataclass
class RunServices:
    suite: Suite
    loop: ServiceLoop
    backend: BrowserBackend
    backend_mcp_url: str
    routes: ProxyRoutes
    proxy_base_url: str
    site_urls: dict[str, str] = field(default_factory=dict)
    # Headers for the proxy's upstream; values name environment variables, never hold secrets.
    upstream_headers: dict[str, str] = field(default_factory=dict)
    # The model gateway's routes, served on the proxy's listener (so --proxy-url covers both).
    gateway: GatewayRoutes = field(default_factory=GatewayRoutes)
    # Bundled sites that speak PurelyMail's account API (an inbox twin): name -> the API's token, its
    # domain, and where the harness reaches it (the browser reaches it by its *.localhost name).
    inbox_twins: dict[str, tuple[str, str, str]] = field(default_factory=dict)

    @classmethod
    def start(cls, suite: Suite, browser: str, options: RunOptions | None = None) -> RunServices:
        loop = ServiceLoop()
        headers: dict[str, str] = {}
        if browser == "kernel":
            from ..browsers.kernel import DEFAULT_MCP_URL, KernelBackend

            # Agents use Kernel's hosted MCP server behind the proxy; the harness uses the API.
            backend: BrowserBackend = KernelBackend()
            backend_url = os.environ.get("KERNEL_MCP_URL", DEFAULT_MCP_URL)
            headers = {"Authorization": "Bearer ${KERNEL_API_KEY}"}
        else:
            from ..browsers.local import LocalBackend
            from ..browsers.mcp_server import build_server

            backend = LocalBackend()
            app = build_server(backend).streamable_http_app(json_response=True, stateless_http=True)
            backend_url = loop.serve(app, "browser MCP server") + "/mcp"
        routes, gateway = ProxyRoutes(), GatewayRoutes()
        host, port = options.proxy_listen if options else ("127.0.0.1", 0)
        if port:  # xdist: one proxy per worker, at consecutive ports
            port += int(os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:] or 0)
        hosts = allowed_hosts(host, options.proxy_url if options else None)
        proxy_url = loop.serve(_listener(routes, gateway, hosts), "proxy and model gateway", host, port)
        if options and options.proxy_url:  # a sandbox reaches it by another name (a tunnel, the Docker host)
            proxy_url = options.proxy_url.format(port=proxy_url.rsplit(":", 1)[1]).rstrip("/")
        services = cls(suite, loop, backend, backend_url, routes, proxy_url, upstream_headers=headers, gateway=gateway)
        for name, site in suite.spec.sites.items():
            if site.app:
                app = load_site_app(suite, name)
                served = loop.serve(app, f"site {name}")
                services.site_urls[name] = f"http://{site.host}:{served.rsplit(':', 1)[1]}"
                if token := getattr(app.state, "purelymail_token", None):  # made by the site, read only here
                    services.inbox_twins[name] = (token, app.state.purelymail_domain, served)
            else:
                services.site_urls[name] = (site.base_url or "").rstrip("/")
        for task in suite.tasks:  # a twin is known by its app, which only now is loaded
            if task.meta.inbox not in (None, LIVE_INBOX) and task.meta.inbox not in services.inbox_twins:
                services.close()
                raise SuiteError(task.path / "task.toml", "metadata.webbench.inbox (clawbench.inbox_site)",
                                 f"site {task.meta.inbox!r} does not speak PurelyMail's account API (its app sets no "
                                 "app.state.purelymail_token)")
        return services

    def inbox_service(self, inbox: str | None):
        """Where a task's trials get their e-mail accounts (trial/inbox.py); None: nowhere (a live
        inbox with no key in the run's environment), and the agent is given no credentials."""
        from .inbox import live_service, twin_service

        if inbox is None:
            return None
        if inbox == LIVE_INBOX:
            return live_service()
        token, domain, served = self.inbox_twins[inbox]
        return twin_service(self.suite.spec.sites[inbox].title, served, self.site_urls[inbox], token, domain)

    def close(self) -> None:
        try:
            self.loop.run(self.backend.close(), timeout=30)
            self.loop.run(self.gateway.aclose(), timeout=30)
        finally:
            self.loop.close()
