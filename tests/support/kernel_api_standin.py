"""A stand-in for the Kernel API endpoints the harness uses, in their request and response
shapes (as the `kernel` SDK 0.131 sends and reads them): browser list/create/retrieve/delete, Playwright
execute, WebMCP tools/invoke (including HTTP 504 `outcome_unknown`), custom tools add/list/remove,
the screenshot, the file API, and extensions (upload, metadata, loaded into a browser at its
creation: `launch` makes that browser where a test gives a real one). It records every request, so tests can count retries and scan for secrets."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

PNG_1PX = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")


# Kernel refuses chrome_policy entries for what it manages itself ("extensions, proxy, CDP/automation")
KERNEL_MANAGED_POLICIES = {"ExtensionSettings", "ExtensionInstallForcelist", "ExtensionInstallBlocklist",
                           "ExtensionInstallAllowlist", "ProxySettings", "ProxyMode", "ProxyServer",
                           "RemoteDebuggingAllowed", "DeveloperToolsAvailability"}


@dataclass
class Browser:
    session_id: str
    name: str
    url: str = "about:blank"
    custom: dict[str, dict] = field(default_factory=dict)  # tool id -> definition
    deleted_at: str | None = None  # set when Kernel ends the session itself (its inactivity timeout)
    extensions: list[str] = field(default_factory=list)  # the uploaded extensions it was made with
    cdp_ws_url: str | None = None  # its own browser's, where the stand-in launched one


class KernelApiStandin:
    def __init__(self, api_key: str, page_values: dict | None = None, cdp_ws_url: str | None = None,
                 launch: Callable[[list[Path], dict], str] | None = None):
        self.api_key = api_key
        self.launch = launch  # a real browser made with the unpacked extensions and the policy asked for: its CDP endpoint
        self.extensions: dict[str, dict] = {}  # id -> {"name", "archive", "checksum"}
        self.unpacked: list[Path] = []  # where each browser's extensions were unpacked, in order
        self.cdp_ws_url = cdp_ws_url  # a real browser's CDP endpoint, given for every browser (None: a dummy URL)
        self.page_values = page_values or {}  # what a page check reads
        self.browsers: dict[str, Browser] = {}
        self.ended: dict[str, Browser] = {}  # ended by Kernel, not by the client: retrievable with include_deleted
        self.requests: list[tuple[str, str, bytes]] = []
        self.fail_next: dict[str, list[int]] = {}  # path suffix -> statuses to answer first
        self.failing_deletes: dict[str, int] = {}  # browser name -> deletes to fail (HTTP 500) before one succeeds
        self.replays: dict[str, str] = {}  # replay id -> "recording" or "stopped"
        self.created = 0
        self.vm_files: dict[str, dict[str, tuple[bytes, str | None]]] = {}  # session -> path -> (bytes, mode), kept after delete
        self.vm_dirs: dict[str, set[str]] = {}
        b = "/browsers/{id}"
        self.app = Starlette(routes=[
            Route("/browsers", self.list_browsers, methods=["GET"]),
            Route("/browsers", self.create, methods=["POST"]),
            Route("/extensions", self.extension_upload, methods=["POST"]),
            Route("/extensions/{name}/metadata", self.extension_get, methods=["GET"]),
            Route(b, self.retrieve, methods=["GET"]),
            Route(b, self.delete, methods=["DELETE"]),
            Route(b + "/playwright/execute", self.execute, methods=["POST"]),
            Route(b + "/webmcp/tools", self.tools, methods=["GET"]),
            Route(b + "/webmcp/invoke", self.invoke, methods=["POST"]),
            Route(b + "/webmcp/custom-tools", self.add_custom, methods=["POST"]),
            Route(b + "/webmcp/custom-tools", self.list_custom, methods=["GET"]),
            Route(b + "/webmcp/custom-tools/{tool}", self.remove_custom, methods=["DELETE"]),
            Route(b + "/computer/screenshot", self.screenshot, methods=["POST"]),
            Route(b + "/replays", self.replay_start, methods=["POST"]),
            Route(b + "/replays/{replay}/stop", self.replay_stop, methods=["POST"]),
            Route(b + "/fs/create_directory", self.fs_create_directory, methods=["PUT"]),
            Route(b + "/fs/write_file", self.fs_write_file, methods=["PUT"]),
        ])

    async def _enter(self, request: Request) -> tuple[dict, Response | None]:
        body = await request.body()
        self.requests.append((request.method, request.url.path, body))
        if request.headers.get("authorization") != f"Bearer {self.api_key}":
            return {}, JSONResponse({"code": "unauthorized", "message": "invalid API key"}, status_code=401)
        for suffix, statuses in self.fail_next.items():
            if request.url.path.endswith(suffix) and statuses:
                status = statuses.pop(0)
                return {}, JSONResponse({"code": "unavailable", "message": "try again"}, status_code=status)
        if body and request.headers.get("content-type", "").startswith("application/octet-stream"):
            return {"_raw": body}, None  # a file's bytes (fs/write_file)
        if request.headers.get("content-type", "").startswith("multipart/form-data"):
            form = await request.form()  # an extension's upload
            return {k: (await v.read() if hasattr(v, "read") else v) for k, v in form.items()}, None
        return (json.loads(body) if body else {}), None

    async def _enter_browser(self, request: Request) -> tuple[dict, Browser | None, Response | None]:
        """_enter, then the browser the path names (a 404 in Kernel's shape if there is none)."""
        body, refused = await self._enter(request)
        if refused:
            return body, None, refused
        browser = self._browser(request)
        return body, browser, (None if browser else self._missing())

    def _browser(self, request: Request) -> Browser | None:
        key = request.path_params["id"]
        return next((b for b in self.browsers.values() if key in (b.session_id, b.name)), None)

    @staticmethod
    def _missing() -> JSONResponse:
        return JSONResponse({"code": "not_found", "message": "browser session not found"}, status_code=404)

    async def list_browsers(self, request: Request):
        _, refused = await self._enter(request)
        if refused:
            return refused
        return JSONResponse([{"session_id": b.session_id, "name": b.name, "cdp_ws_url": "", "created_at": "2026-12-02T00:00:00Z",
                             "headless": True, "stealth": True, "timeout_seconds": 60} for b in self.browsers.values()],
                            headers={"X-Has-More": "false", "X-Next-Offset": "0"})

    async def create(self, request: Request):
        body, refused = await self._enter(request)
        if refused:
            return refused
        policy = body.get("chrome_policy") or {}
        if not isinstance(policy, dict) or set(policy) & KERNEL_MANAGED_POLICIES:
            return JSONResponse({"code": "bad_request", "message": "chrome_policy: a policy Kernel manages itself"},
                                status_code=400)
        asked = body.get("extensions") or []
        found = [self._extension(e.get("id") or e.get("name") or "") for e in asked]
        if None in found:
            return JSONResponse({"code": "not_found", "message": "extension not found"}, status_code=404)
        self.created += 1
        session_id = f"kb_{self.created:04d}"  # never reused, as Kernel's ids are not
        browser = Browser(session_id, body.get("name") or session_id)
        browser.extensions = [e["name"] for e in found]
        if self.launch is not None:
            browser.cdp_ws_url = self.launch([self._unpack(e) for e in found], policy)
        self.browsers[session_id] = browser
        return JSONResponse({
            "session_id": session_id, "name": browser.name, "stealth": bool(body.get("stealth")),
            "headless": bool(body.get("headless")), "cdp_ws_url": browser.cdp_ws_url or self.cdp_ws_url or f"wss://standin/{session_id}/cdp",
            "webdriver_ws_url": f"wss://standin/{session_id}/wd", "created_at": "2026-12-02T00:00:00Z",
            "timeout_seconds": 60, "region": "us-east", "memory": {"size_mb": 4096},
            "browser_live_view_url": f"https://live.standin/{session_id}",
        })

    def _extension(self, key: str) -> dict | None:
        return self.extensions.get(key) or next((e for e in self.extensions.values() if e["name"] == key), None)

    def _unpack(self, extension: dict) -> Path:
        folder = Path(tempfile.mkdtemp(prefix="kernel-standin-extension-"))
        with zipfile.ZipFile(io.BytesIO(extension["archive"])) as archive:
            archive.extractall(folder)
        self.unpacked.append(folder)
        return folder

    def _extension_shape(self, extension: dict) -> dict:
        return {"id": extension["id"], "name": extension["name"], "created_at": "2026-12-02T00:00:00Z",
                "size_bytes": len(extension["archive"]), "checksum": extension["checksum"], "last_used_at": None}

    async def extension_upload(self, request: Request):
        """Kernel's upload: a zip of an unpacked extension, its name unique in the project (409 if taken)."""
        body, refused = await self._enter(request)
        if refused:
            return refused
        archive, name = body.get("file"), body.get("name")
        if not isinstance(archive, bytes) or not zipfile.is_zipfile(io.BytesIO(archive)):
            return JSONResponse({"code": "bad_request", "message": "file must be a zip archive"}, status_code=400)
        if name and self._extension(name):
            return JSONResponse({"code": "conflict", "message": "an extension of that name exists"}, status_code=409)
        extension = {"id": f"ext_{len(self.extensions) + 1:04d}", "name": name, "archive": archive,
                     "checksum": hashlib.sha256(archive).hexdigest()}
        self.extensions[extension["id"]] = extension
        return JSONResponse(self._extension_shape(extension))

    async def extension_get(self, request: Request):
        _, refused = await self._enter(request)
        if refused:
            return refused
        if (extension := self._extension(request.path_params["name"])) is None:
            return JSONResponse({"code": "not_found", "message": "extension not found"}, status_code=404)
        return JSONResponse(self._extension_shape(extension))

    async def replay_start(self, request: Request):
        """Kernel's replays API: a recording per browser, viewed at its URL once stopped."""
        _, browser, refused = await self._enter_browser(request)
        if refused:
            return refused
        replay_id = f"rp_{browser.session_id}"
        self.replays[replay_id] = "recording"
        return JSONResponse({"replay_id": replay_id, "replay_view_url": f"https://replays.standin/{replay_id}",
                             "started_at": "2026-12-02T00:00:01Z"})

    async def replay_stop(self, request: Request):
        _, browser, refused = await self._enter_browser(request)
        if refused:
            return refused
        replay_id = request.path_params["replay"]
        if self.replays.get(replay_id) != "recording":
            return JSONResponse({"code": "not_found", "message": f"no replay {replay_id} recording"}, status_code=404)
        self.replays[replay_id] = "stopped"
        return Response(status_code=200)

    def end(self, name: str) -> None:
        """Kernel ends a session itself (its `timeout_seconds` of inactivity ran out)."""
        browser = next(b for b in self.browsers.values() if name in (b.session_id, b.name))
        browser.deleted_at = "2026-12-02T00:01:00Z"
        self.ended[browser.session_id] = self.browsers.pop(browser.session_id)

    async def retrieve(self, request: Request):
        _, refused = await self._enter(request)
        if refused:
            return refused
        browser = self._browser(request)
        if browser is None and request.query_params.get("include_deleted") == "true":
            key = request.path_params["id"]
            browser = next((b for b in self.ended.values() if key in (b.session_id, b.name)), None)
        if browser is None:
            return self._missing()
        return JSONResponse({
            "session_id": browser.session_id, "name": browser.name, "stealth": True, "headless": True,
            "cdp_ws_url": f"wss://standin/{browser.session_id}/cdp", "created_at": "2026-12-02T00:00:00Z",
            "timeout_seconds": 60, "deleted_at": browser.deleted_at,
        })

    async def delete(self, request: Request):
        _, browser, refused = await self._enter_browser(request)
        if refused:
            return refused
        if self.failing_deletes.get(browser.name, 0) > 0:
            self.failing_deletes[browser.name] -= 1
            return JSONResponse({"code": "internal", "message": "delete failed"}, status_code=500)
        del self.browsers[browser.session_id]
        return Response(status_code=204)

    async def execute(self, request: Request):
        body, browser, refused = await self._enter_browser(request)
        if refused:
            return refused
        code = body.get("code", "")
        goto = re.search(r"page\.goto\((['\"])([^'\"]+)\1", code)
        if goto and "newPage" not in code:
            browser.url = goto.group(2)
            return JSONResponse({"success": True, "result": browser.url})
        if "newPage" in code:  # a page check: what the harness's check code returns from Kernel's runtime
            url = re.search(r"p\.goto\((\"[^\"]+\")", code)
            return JSONResponse({"success": True, "result": {
                "value": self.page_values, "url": json.loads(url.group(1)) if url else None,
                "html": f"<html><body><pre>{json.dumps(self.page_values)}</pre></body></html>"}})
        return JSONResponse({"success": True, "result": None, "stdout": "", "stderr": ""})

    async def fs_create_directory(self, request: Request):
        body, browser, refused = await self._enter_browser(request)
        if refused:
            return refused
        if not str(body.get("path", "")).startswith("/"):
            return JSONResponse({"code": "bad_request", "message": "path must be absolute"}, status_code=400)
        self.vm_dirs.setdefault(browser.session_id, set()).add(body["path"].rstrip("/"))
        return Response(status_code=200)

    async def fs_write_file(self, request: Request):
        """The file's bytes as the body, its path and mode in the query (Kernel's fs/write_file)."""
        body, browser, refused = await self._enter_browser(request)
        if refused:
            return refused
        path = request.query_params.get("path", "")
        if not path.startswith("/") or path.rsplit("/", 1)[0] not in self.vm_dirs.get(browser.session_id, set()):
            return JSONResponse({"code": "not_found", "message": "no such directory"}, status_code=404)
        self.vm_files.setdefault(browser.session_id, {})[path] = (body.get("_raw", b""), request.query_params.get("mode"))
        return Response(status_code=200)

    async def tools(self, request: Request):
        _, browser, refused = await self._enter_browser(request)
        if refused:
            return refused
        listed = [{"tool_ref": f"wmcp_{tid}", "tool": d["tool"],
                   "source": {"window_id": 1, "tab_id": 1, "page_title": "", "page_url": browser.url, "frame": "main",
                              "custom": {"id": tid, "namespace": d["namespace"]}}}
                  for tid, d in browser.custom.items()]
        return JSONResponse({"tools": listed})

    async def invoke(self, request: Request):
        body, refused = await self._enter(request)
        if refused:
            return refused
        if body.get("tool_ref") == "wmcp_slow":
            return JSONResponse({"code": "outcome_unknown", "message": "the tool did not answer in time; it may have run",
                                 "invocation_id": "inv_slow"}, status_code=504)
        return JSONResponse({"invocation_id": "inv_1", "status": "completed", "output": {"echo": body.get("input")}})

    async def add_custom(self, request: Request):
        body, browser, refused = await self._enter_browser(request)
        if refused:
            return refused
        source = body.get("source", "")
        if "url_patterns" not in source:
            return JSONResponse({"code": "invalid_source", "message": "each tool needs match.url_patterns"}, status_code=400)
        namespace = body["namespace"]
        if body.get("force_overwrite_namespace"):
            browser.custom = {k: v for k, v in browser.custom.items() if v["namespace"] != namespace}
        elif any(d["namespace"] == namespace for d in browser.custom.values()):
            return JSONResponse({"code": "conflict", "message": f"namespace {namespace} exists"}, status_code=409)
        tid = f"ct_{sum(len(b.custom) for b in self.browsers.values()) + 1}"
        definition = {"id": tid, "kind": "page", "namespace": namespace, "match": {"url_patterns": ["*"]},
                      "tool": {"name": f"{namespace}_tool", "description": "injected", "inputSchema": {"type": "object"}}}
        browser.custom[tid] = definition
        return JSONResponse({"tools": [definition]}, status_code=201)

    async def list_custom(self, request: Request):
        _, browser, refused = await self._enter_browser(request)
        return refused or JSONResponse({"tools": list(browser.custom.values())})

    async def remove_custom(self, request: Request):
        _, browser, refused = await self._enter_browser(request)
        if refused or request.path_params["tool"] not in browser.custom:
            return refused or self._missing()
        del browser.custom[request.path_params["tool"]]
        return Response(status_code=204)

    async def screenshot(self, request: Request):
        _, refused = await self._enter(request)
        if refused:
            return refused
        return Response(PNG_1PX, media_type="image/png")
