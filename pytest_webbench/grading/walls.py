"""The walls a hostile runner tried (runners/hostile.py), held or breached, as one trial's grade.

The runner probes each route from inside the trial, on whatever environment and browser the run
uses, and writes what it saw to `walls.json` in the trial's results (the harness's side, in its
own process). After the trial the harness adds what only it can see: what it copied out of the
agent's folders and whether its own file outside was written through. A trial passes when every
route held; a route that could not be tried where it ran says so (`not probed`) and is neither.
"""

from __future__ import annotations

import json
from pathlib import Path
from pydantic import BaseModel, Field, ValidationError

from ..results.records import Wall, atomic_write
from .grade import Grade

WALLS = "walls.json"


class Walls(BaseModel):
    walls: list[Wall] = Field(default_factory=list)
    canary_file: str | None = None  # the harness's file outside the trial that planted links point at
    canary_text: str | None = None
    secrets: list[str] = Field(default_factory=list)  # values that must appear nowhere the agent can write
    browser_calls: int = 0  # the runner's calls through the proxy that its browser answered


def write_walls(trial_dir: Path, walls: Walls) -> None:
    atomic_write(trial_dir / WALLS, walls.model_dump_json(indent=1))


def read_walls(trial_dir: Path) -> Walls | None:
    try:
        return Walls.model_validate_json((trial_dir / WALLS).read_bytes())
    except FileNotFoundError:
        return None
    except (ValidationError, ValueError) as exc:
        return Walls(walls=[Wall(route="the probes' own record", status="breached",
                                 evidence=f"{trial_dir / WALLS} is unreadable: {exc}"[:500])])


def after_the_trial(trial_dir: Path, walls: Walls) -> Walls:
    """What the harness adds once the trial's files were copied out: the links the agent planted
    were not followed (nothing of the harness's in its copy, every link named as refused), and the
    harness's own file outside the trial is as it was."""
    from ..environments.host import REFUSALS

    copied = trial_dir / "agent"
    leaked = []
    for path in copied.rglob("*") if copied.is_dir() else []:
        if path.is_symlink():
            leaked.append(f"{path.relative_to(trial_dir)} is a link")
        elif path.is_file() and any(s.encode() in path.read_bytes() for s in walls.secrets if s):
            leaked.append(f"{path.relative_to(trial_dir)} holds a harness secret")
    try:
        refused = json.loads((trial_dir / REFUSALS).read_text())
    except (OSError, ValueError):
        refused = None
    planted = [w for w in walls.walls if w.route == "files: links out of the trial"]
    if planted and planted[0].status == "not probed":
        out = list(walls.walls)
    else:
        named = "; ".join(f"{r['path']}: {r['why']}" for r in refused or [])[:500] if refused else ""
        out = [w for w in walls.walls if w.route != "files: links out of the trial"]
        out.append(Wall(route="files: links out of the trial", status="breached" if leaked else "held",
                        evidence="; ".join(leaked)[:500] if leaked else (
                            f"not followed, named: {named}" if named else "not followed (the environment copied none)")))
    out.append(fault_evidence(trial_dir, walls.browser_calls))
    if walls.canary_file is not None:
        try:
            now = Path(walls.canary_file).read_text()
        except OSError as exc:
            now = f"(unreadable: {exc.strerror})"
        out.append(Wall(route="files: writes through planted links", status="held" if now == walls.canary_text else "breached",
                        evidence=f"the harness's file outside the trial reads {now[:120]!r}"))
    return walls.model_copy(update={"walls": out})


def fault_evidence(trial_dir: Path, calls_made: int) -> Wall:
    """Whether the harness's own log of this trial holds what charges a fault the agent causes to
    the agent (verdict.charged_to_agent): its browser crashed after its calls is its failure only
    if the proxy logged them as reaching the browser. No fault is caused: that would spend this
    trial's verdict, and the decision from the evidence is one function, the same everywhere."""
    from ..proxy.log import read_call_log
    from ..results.records import BrowserCalls
    from .verdict import charged_to_agent

    route = "record: a fault the agent causes is charged to it"
    if not calls_made:
        return Wall(route=route, status="not probed", evidence="the runner made no browser call here")
    contents = read_call_log(trial_dir / "proxy-log.jsonl")
    logged = sum(1 for r in contents.records if r.decision == "forwarded" and r.method == "tools/call")
    charged = charged_to_agent("browser_crashed", BrowserCalls(forwarded=logged), None)
    held = charged and logged >= calls_made
    return Wall(route=route, status="held" if held else "breached",
                evidence=f"the proxy's log has {logged} of its {calls_made} browser calls as reaching the browser: a crash "
                         f"it caused after them {'fails it, flagged' if charged else 'would be errored, its pair dropped'}")


def summary(walls: Walls) -> tuple[bool, str]:
    """(every route held, one line saying which did not)."""
    breached = [w for w in walls.walls if w.status == "breached"]
    probed = [w for w in walls.walls if w.status != "not probed"]
    if breached:
        return False, f"{len(breached)} of {len(probed)} walls breached: " + "; ".join(
            f"{w.route} ({w.evidence[:160]})" for w in breached)
    if not probed:
        return False, "no wall could be probed"
    return True, f"all {len(probed)} walls probed held" + (
        f" ({len(walls.walls) - len(probed)} not probed here)" if len(probed) < len(walls.walls) else "")


def grade_walls(trial_dir: Path) -> tuple[Grade, list[Wall]]:
    """The hostile runner's trial graded by its walls: passed when every route it tried held."""
    walls = read_walls(trial_dir)
    if walls is None:
        return Grade(False, "wall_breached", "the probes left no record (walls.json): nothing was tried"), []
    walls = after_the_trial(trial_dir, walls)
    write_walls(trial_dir, walls)
    held, line = summary(walls)
    return Grade(held, None if held else "wall_breached", line, answer={w.route: w.status for w in walls.walls}), walls.walls
