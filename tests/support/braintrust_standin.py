"""A stand-in for Braintrust's HTTP API, in the shapes its Python SDK (0.48) sends and reads:
API-key login, project and experiment creation (REST v1), the version probe and row upload
(/logs3). It keeps what it receives so a test can check every row and scan every payload."""

from __future__ import annotations

import json

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

CREATED = "2026-12-02T00:00:00Z"


class BraintrustStandin:
    def __init__(self, api_key: str):
        self.api_key = api_key
        self.bodies: list[bytes] = []  # every request body, for secret scans
        self.projects: dict[str, dict] = {}
        self.experiments: dict[str, dict] = {}
        self.rows: list[dict] = []
        self.app = Starlette(routes=[
            Route("/api/apikey/login", self.login, methods=["POST"]),
            Route("/v1/project", self.project, methods=["POST"]),
            Route("/v1/experiment", self.experiment, methods=["POST"]),
            Route("/version", self.version, methods=["GET"]),
            Route("/logs3", self.logs3, methods=["POST"]),
        ])

    async def _authorised(self, request: Request) -> dict | None:
        body = await request.body()
        self.bodies.append(body)
        if request.headers.get("authorization") != f"Bearer {self.api_key}":
            return None
        return json.loads(body) if body else {}

    async def login(self, request: Request):
        if await self._authorised(request) is None:
            return JSONResponse({"error": "Invalid API key"}, status_code=401)
        base = str(request.base_url).rstrip("/")
        return JSONResponse({"org_info": [{"id": "org-1", "name": "local", "api_url": base, "proxy_url": base,
                                           "is_universal_api": True}]})

    async def project(self, request: Request):
        body = await self._authorised(request)
        if body is None:
            return JSONResponse({"error": "unauthorised"}, status_code=401)
        project = self.projects.setdefault(body["name"], {"id": f"proj-{len(self.projects) + 1}", "name": body["name"],
                                                          "org_id": "org-1", "created": CREATED})
        return JSONResponse(project)

    async def experiment(self, request: Request):
        body = await self._authorised(request)
        if body is None:
            return JSONResponse({"error": "unauthorised"}, status_code=401)
        experiment = {"id": f"exp-{len(self.experiments) + 1}", "name": body["name"], "project_id": body["project_id"],
                      "created": CREATED, "public": False, "metadata": body.get("metadata"), "repo_info": body.get("repo_info")}
        self.experiments[experiment["id"]] = experiment
        return JSONResponse(experiment)

    async def version(self, request: Request):
        await self._authorised(request)
        return JSONResponse({"logs3_payload_max_bytes": 10_000_000})

    async def logs3(self, request: Request):
        body = await self._authorised(request)
        if body is None:
            return JSONResponse({"error": "unauthorised"}, status_code=401)
        # Braintrust keys rows by id: a row sent again (the SDK retries a slow request) replaces
        # the first, as the real service does, instead of counting twice.
        for row in body.get("rows", []):
            key = (row.get("experiment_id"), row.get("id"))
            self.rows = [r for r in self.rows if (r.get("experiment_id"), r.get("id")) != key] + [row]
        return JSONResponse({})

    def rows_by_experiment(self) -> dict[str, list[dict]]:
        out: dict[str, list[dict]] = {}
        for row in self.rows:
            name = self.experiments[row["experiment_id"]]["name"]
            out.setdefault(name, []).append(row)
        return out
