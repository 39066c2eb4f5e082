"""CodeHub: a code host modelled on GitHub: repositories, pull requests (paginated, filterable by
state), releases and search. Its own WebMCP tool searches repositories. A new issue's form is sent
by the page's script, as JSON to GitHub's REST path for it (the form itself posts nothing)."""

from __future__ import annotations

import hashlib
import random

from starlette.applications import Starlette
from starlette.responses import HTMLResponse, JSONResponse
from starlette.routing import Route

from common import esc, js, page, page_number, paginate, pager, record_write

OWNERS = ["acme", "nimbus", "orbital"]
REPOS = {
    "acme/rocket": "Reusable launch vehicle flight software",
    "acme/launchpad": "Ground support tooling for rocket",
    "nimbus/cloudkit": "A tiny cloud orchestration toolkit",
    "nimbus/raincheck": "Weather-aware job scheduler",
    "orbital/telemetry": "Time series store for spacecraft telemetry",
}
AUTHORS = ["mhamilton", "kjohnson", "dvaughan", "gleonov", "sride", "ejemison", "cchawla", "tpeake"]
SUBJECTS = [
    "Fix telemetry buffer overflow on reconnect", "Add retry to staging uplink", "Bump parser to 2.4",
    "Refactor guidance loop timing", "Document abort modes", "Speed up log rotation",
    "Fix off-by-one in stage counter", "Add thermal model tests", "Remove deprecated gimbal API",
    "Handle NaN in altitude filter", "Improve CLI help text", "Cache star tracker calibration",
]
PER_PAGE = 10


def _build() -> dict[str, dict]:
    rng = random.Random(1969)  # fixed: pinned answers depend on it
    data = {}
    for repo in REPOS:
        pulls = []
        for number in range(1, 38):
            state = rng.choice(["merged", "merged", "closed", "open"])
            pulls.append({
                "number": number, "title": f"{rng.choice(SUBJECTS)} (#{number})", "author": rng.choice(AUTHORS),
                "state": state, "comments": rng.randint(0, 40),
            })
        # The one the tasks ask about: unique title, merged.
        if repo == "acme/rocket":
            pulls[22] = {"number": 23, "title": "Fix telemetry buffer overflow when the downlink stalls",
                         "author": "ejemison", "state": "merged", "comments": 17}
        releases = [{"tag": f"v{1 + i // 4}.{i % 4}.0", "name": f"Release {1 + i // 4}.{i % 4}", "notes": rng.choice(SUBJECTS)}
                    for i in range(9)]
        data[repo] = {"pulls": list(reversed(pulls)), "releases": list(reversed(releases))}
    return data


DATA = _build()

NATIVE_TOOLS = """
document.modelContext.registerTool({
  name: 'search_repositories',
  description: 'Search CodeHub repositories by name or description.',
  inputSchema: {type: 'object', properties: {query: {type: 'string'}}, required: ['query']},
  execute: async ({query}) => (await (await fetch('/api/search?q=' + encodeURIComponent(query))).json()),
});
"""


def _nav() -> str:
    return "<a href='/explore'>Explore</a><form action='/search'><input name='q' placeholder='Search repositories'></form>"


def _shell(title: str, body: str) -> HTMLResponse:
    return page(title, "CodeHub", _nav(), body, NATIVE_TOOLS)


def _repo(request) -> str | None:
    name = f"{request.path_params['owner']}/{request.path_params['repo']}"
    return name if name in DATA else None


async def home(request):
    items = "".join(f"<div class='card'><a href='/{r}'>{esc(r)}</a><p>{esc(d)}</p></div>" for r, d in REPOS.items())
    return _shell("CodeHub", f"<h1>Popular repositories</h1>{items}")


async def explore(request):
    return await home(request)


def _search(query: str) -> list[dict]:
    q = query.lower()
    return [{"repository": r, "description": d} for r, d in REPOS.items() if q in r.lower() or q in d.lower()]


async def search(request):
    q = request.query_params.get("q", "")
    hits = "".join(f"<div class='card'><a href='/{h['repository']}'>{esc(h['repository'])}</a></div>" for h in _search(q))
    return _shell(f"Search: {q}", f"<h1>Results for “{esc(q)}”</h1>{hits or '<p>No repositories found.</p>'}")


async def api_search(request):
    return JSONResponse(_search(request.query_params.get("q", "")))


async def repo_home(request):
    repo = _repo(request)
    if repo is None:
        return HTMLResponse("<h1>404</h1>", status_code=404)
    latest = DATA[repo]["releases"][0]
    body = (f"<h1>{esc(repo)}</h1><p>{esc(REPOS[repo])}</p><nav><a href='/{repo}/pulls'>Pull requests</a> · "
            f"<a href='/{repo}/releases'>Releases</a> · <a href='/{repo}/issues/new'>New issue</a></nav><div class='card'>Latest release: "
            f"<a href='/{repo}/releases'>{esc(latest['tag'])}</a></div>")
    return _shell(repo, body)


async def pulls(request):
    repo = _repo(request)
    if repo is None:
        return HTMLResponse("<h1>404</h1>", status_code=404)
    state = request.query_params.get("state", "all")
    items = [p for p in DATA[repo]["pulls"] if state == "all" or p["state"] == state]
    shown, pages = paginate(items, page_number(request), PER_PAGE)
    rows = "".join(
        f"<tr data-number='{p['number']}'><td><span class='label {p['state']}'>{p['state']}</span></td>"
        f"<td><a href='/{repo}/pull/{p['number']}'>{esc(p['title'])}</a></td><td>#{p['number']}</td>"
        f"<td>by {esc(p['author'])}</td></tr>" for p in shown
    )
    filters = " ".join(f"<a href='/{repo}/pulls?state={s}'>{s.title()}</a>" for s in ("all", "open", "merged", "closed"))
    body = (f"<h1>{esc(repo)} · Pull requests</h1><p>{filters}</p><table>{rows}</table>"
            f"{pager(f'/{repo}/pulls', page_number(request), pages, f'&state={state}')}")
    return _shell(f"Pull requests · {repo}", body)


async def pull(request):
    repo = _repo(request)
    number = int(request.path_params["number"])
    match = [p for p in DATA.get(repo or "", {}).get("pulls", []) if p["number"] == number]
    if not match:
        return HTMLResponse("<h1>404</h1>", status_code=404)
    p = match[0]
    body = (f"<h1 class='pr-title'>{esc(p['title'])} <span>#{p['number']}</span></h1>"
            f"<p><span class='label {p['state']}'>{p['state']}</span> <span class='author'>{esc(p['author'])}</span> "
            f"wants to merge into main · {p['comments']} comments</p>")
    return _shell(f"{p['title']} · Pull Request #{number} · {repo}", body)


async def releases(request):
    repo = _repo(request)
    if repo is None:
        return HTMLResponse("<h1>404</h1>", status_code=404)
    items = "".join(
        f"<div class='card release'><h2 class='tag'>{esc(r['tag'])}</h2><p>{esc(r['name'])}: {esc(r['notes'])}</p>"
        f"{'<span class=label>Latest</span>' if i == 0 else ''}</div>"
        for i, r in enumerate(DATA[repo]["releases"])
    )
    return _shell(f"Releases · {repo}", f"<h1>{esc(repo)} · Releases</h1>{items}")


# GitHub's REST API in its shapes, under /api/v3 as GitHub Enterprise serves it, so the public-web
# suite's GitHub tool batch runs here before it meets github.com.
def _api_pull(repo: str, pr: dict) -> dict:
    merged = pr["state"] == "merged"
    merger = AUTHORS[(pr["number"] * 7) % len(AUTHORS)]
    return {"number": pr["number"], "title": pr["title"], "user": {"login": pr["author"]},
            "state": "open" if pr["state"] == "open" else "closed", "merged": merged,
            "merged_by": {"login": merger} if merged else None,
            "merged_at": f"2026-01-{pr['number'] % 28 + 1:02d}T12:00:00Z" if merged else None,
            "merge_commit_sha": hashlib.sha1(f"{repo}#{pr['number']}".encode()).hexdigest() if merged else None}


async def api_pull(request):
    repo = f"{request.path_params['owner']}/{request.path_params['repo']}"
    pr = next((p for p in DATA.get(repo, {}).get("pulls", []) if p["number"] == request.path_params["number"]), None)
    if pr is None:
        return JSONResponse({"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}, status_code=404)
    return JSONResponse(_api_pull(repo, pr))


async def api_search_issues(request):
    terms = request.query_params.get("q", "").split()
    repo = next((t.split(":", 1)[1] for t in terms if t.startswith("repo:")), None)
    pulls = DATA.get(repo, {}).get("pulls", []) if repo else []
    if "is:merged" in terms:
        pulls = [p for p in pulls if p["state"] == "merged"]
    # Free words (GitHub's `in:title` qualifier kept them to the title): every one must be in it.
    words = [t.casefold() for t in terms if ":" not in t]
    pulls = [p for p in pulls if all(w in p["title"].casefold() for w in words)]
    per_page = int(request.query_params.get("per_page", 30))
    items = [{"number": p["number"], "title": p["title"], "user": {"login": p["author"]}, "pull_request": {}} for p in pulls]
    return JSONResponse({"total_count": len(items), "incomplete_results": False, "items": items[:per_page]})


LABELS = ("bug", "documentation", "enhancement")
ISSUES: dict[str, list[dict]] = {}
NEW_ISSUE_SCRIPT = """
document.getElementById('new-issue').addEventListener('submit', async (e) => {
  e.preventDefault();
  const f = e.target;
  const issue = { title: f.title.value.trim(), body: f.body.value,
                  labels: [...f.querySelectorAll('input[name=label]:checked')].map((c) => c.value) };
  const status = document.getElementById('issue-status');
  try {
    const res = await fetch(%s, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(issue) });
    const made = await res.json();
    if (!res.ok) throw new Error(made.message);
    location.href = made.html_url;
  } catch (err) { status.textContent = 'Could not create the issue: ' + err.message; }
});
"""


async def new_issue(request):
    repo = _repo(request)
    if repo is None:
        return HTMLResponse("Not found", status_code=404)
    labels = "".join(f"<label><input type='checkbox' name='label' value='{lab}'> {lab}</label> " for lab in LABELS)
    return _shell(f"New issue · {repo}", (
        f"<h1>{esc(repo)} · New issue</h1><form id='new-issue'><p><label>Title <input name='title' size='60'></label></p>"
        f"<p><label>Description <textarea name='body' rows='5' cols='60'></textarea></label></p><p>Labels: {labels}</p>"
        "<button id='submit-issue'>Submit new issue</button></form><p id='issue-status'></p>"
        f"<script>{NEW_ISSUE_SCRIPT % js(f'/api/v3/repos/{repo}/issues')}</script>"))


async def api_create_issue(request):
    repo = _repo(request)
    try:
        issue = await request.json()
    except ValueError:
        issue = None
    if repo is None or not isinstance(issue, dict) or not str(issue.get("title", "")).strip():
        return JSONResponse({"message": "Validation Failed"}, status_code=422)
    made = ISSUES.setdefault(repo, [])
    made.append({"title": issue["title"], "body": issue.get("body", ""), "labels": list(issue.get("labels") or [])})
    record_write("codehub", "issue", {"repo": repo, **made[-1]})
    number = len(made)
    return JSONResponse({"number": number, "title": issue["title"], "html_url": f"/{repo}/issues/{number}"}, status_code=201)


async def issue_page(request):
    repo = _repo(request)
    made = ISSUES.get(repo or "", [])
    number = request.path_params["number"]
    if not 1 <= number <= len(made):
        return HTMLResponse("Not found", status_code=404)
    return _shell(f"Issue {number}", f"<h1>{esc(made[number - 1]['title'])}</h1><p>#{number}</p>")


def create_app() -> Starlette:
    return Starlette(routes=[
        Route("/api/v3/repos/{owner}/{repo}/pulls/{number:int}", api_pull), Route("/api/v3/search/issues", api_search_issues),
        Route("/api/v3/repos/{owner}/{repo}/issues", api_create_issue, methods=["POST"]),
        Route("/{owner}/{repo}/issues/new", new_issue), Route("/{owner}/{repo}/issues/{number:int}", issue_page),
        Route("/", home), Route("/explore", explore), Route("/search", search), Route("/api/search", api_search),
        Route("/{owner}/{repo}", repo_home), Route("/{owner}/{repo}/pulls", pulls),
        Route("/{owner}/{repo}/pull/{number:int}", pull), Route("/{owner}/{repo}/releases", releases),
    ])
