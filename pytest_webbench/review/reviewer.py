"""The review of a run (`--review`, `python -m pytest_webbench.report review RUN_DIR`): after every
agent has stopped, a reviewer model reads the harness's own account of each trial worth reading
(review/account.py) and says what happened, which failure mode it was, and whether the agent kept
to its arm's rules; for each discordant pair, what the treatment trial did differently.

It only reads. Its model is called through the model gateway, a route of its own for each trial
or pair reviewed, metered and capped like the judge; it never sees a harness key (the gateway adds
the real one). What it finds is written beside the records (review/records.py) and shown by the
report; it never changes an outcome, a grade or a statistic.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ValidationError

from ..results.records import TrialRecord, read_trial_records
from .account import ACCOUNT_CHARS, build_account
from .records import (REVIEWS, Finding, PairFinding, PairReview, ReviewRun, TrialReview, write_pair_review,
                      write_review_run, write_trial_review)

# One review: an account of at most ACCOUNT_CHARS bytes, the prompt and a short answer, which even a
# dear model ($15 and $75 a million tokens) fits; still a cap, as the judge's is.
REVIEW_SPEND_LIMIT_USD = 1.00
REVIEW_TOKEN_LIMIT = 60_000
MAX_TOKENS = 700
TIMEOUT_SEC = 120
ATTEMPTS = 2  # a reply not in the schema is asked once more
LOGS = "logs"
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL", re.I)


@dataclass(frozen=True)
class ReviewSetup:
    """The reviewer's model, decided before any review (planning/configure.py, or the command)."""

    model: str  # provider/model
    api: str  # "chat" (OpenAI's and OpenRouter's) or "messages" (Anthropic's)
    price: object | None  # gateway.meter.Price; None: unpriced, allowed
    upstream: str | None  # its API's base URL (None: its provider's)


class ReviewConfigError(ValueError):
    pass


def reviewer_setup(model: str, base_url: str | None, model_price: str | None, allow_unpriced: bool,
                   check_key: bool = True) -> ReviewSetup:
    """The reviewer as asked for, refused (ReviewConfigError, naming what is wrong) where the
    gateway cannot speak or price its model, or its provider's key is not set."""
    from ..gateway.providers import GatewayConfigError, model_price as price_of, provider_of

    try:
        provider = provider_of(model)
        price = price_of(model, model_price, allow_unpriced)
    except GatewayConfigError as exc:
        raise ReviewConfigError(f"the reviewer: {exc}") from None
    if check_key and not os.environ.get(provider.key_variable):
        raise ReviewConfigError(f"the reviewer {model}: {provider.key_variable} is not set (the gateway adds the real key "
                                "to the reviewer's requests; it never leaves the harness)")
    return ReviewSetup(model=model, api="messages" if provider.key_header == "x-api-key" else "chat", price=price,
                       upstream=base_url)


def setup_for_run(manifest, model: str | None, base_url: str | None, model_price: str | None,
                  allow_unpriced: bool) -> tuple[str, str | None, str | None, bool]:
    """The reviewer's model, endpoint and price for a run: as given, else the run's judge, else the
    run's own model at the run's endpoint and price (as the judge takes them). Refused where none."""
    if model:
        return model, base_url, model_price, allow_unpriced
    if manifest.judge_model and manifest.judge_model != manifest.model:
        return manifest.judge_model, base_url or manifest.judge_base_url, model_price, allow_unpriced
    if not manifest.model:
        raise ReviewConfigError("the run asked no model (its runner calls none) and has no judge: name the reviewer with "
                                "--review-model PROVIDER/MODEL")
    return (manifest.model, base_url or manifest.model_base_url, model_price or manifest.model_price,
            allow_unpriced or bool(manifest.allow_unpriced))


def harness_secrets() -> list[str]:
    """The harness's own key-like values (long enough to be a key), to keep out of what is written."""
    return [v for k, v in os.environ.items() if SECRET_NAME.search(k) and len(v) >= 12]


@cache
def prompt(name: str) -> str:
    return (resources.files("pytest_webbench.review") / "prompts" / f"{name}.md").read_text(encoding="utf-8")


def discordant_pairs(records: list[TrialRecord]) -> list[tuple[TrialRecord, TrialRecord]]:
    """Control and treatment trials of one task and attempt where exactly one passed (an errored
    trial makes no pair: the paired tests leave it out too)."""
    by_pair: dict[tuple[str, int], dict[str, TrialRecord]] = {}
    for r in records:
        if r.arm in ("control", "treatment") and r.pair_id:
            by_pair.setdefault((r.task, r.attempt), {})[r.arm] = r
    out = []
    for (_, _), arms in sorted(by_pair.items()):
        c, t = arms.get("control"), arms.get("treatment")
        if c and t and {c.outcome, t.outcome} == {"passed", "failed"}:
            out.append((c, t))
    return out


def why_review(record: TrialRecord, in_discordant_pair: bool) -> str | None:
    """Why a trial is worth reading (None: it is not, unless every trial is asked for)."""
    if record.outcome == "errored":
        return f"errored ({record.stop_reason})"
    if record.outcome == "failed":
        return f"failed ({record.stop_reason})"
    if record.flags:
        return "flagged"
    if record.calls.rejected:  # a pass with a call its arm forbids: the trial a rules check is for
        return f"the proxy refused {record.calls.rejected} of its calls"
    if in_discordant_pair:
        return "a discordant pair"
    return None


def parse_reply(text: str, model: type[BaseModel]) -> BaseModel:
    """The one JSON object the prompt asks for (a code fence around it tolerated), in its schema;
    ValueError otherwise."""
    text = (text or "").strip()
    try:
        obj = json.loads(text[text.index("{"): text.rindex("}") + 1])
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"no JSON object in the reviewer's reply: {text[:200]!r}") from exc
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        raise ValueError(f"the reviewer's reply is not in its schema: {str(exc)[:300]}") from None


class Reviewer:
    """One review of one run: a gateway of its own (served in this process for the review's life),
    a route for each trial or pair, and the totals."""

    def __init__(self, experiment_dir: Path, setup: ReviewSetup):
        self.experiment_dir, self.setup = experiment_dir, setup
        self.run = ReviewRun(model=setup.model, account_budget_chars=ACCOUNT_CHARS,
                             cost_usd=0.0 if setup.price is not None else None)
        self._loop = self._routes = self._base = None

    def __enter__(self) -> Reviewer:
        from ..gateway.routes import GatewayRoutes
        from ..service_loop import ServiceLoop

        self._loop, self._routes = ServiceLoop(), GatewayRoutes()
        self._base = self._loop.serve(self._routes.app, "review gateway")
        return self

    def __exit__(self, *exc) -> None:
        self._loop.run(self._routes.aclose())
        self._loop.close()

    def _ask(self, name: str, system: str, user: str, schema: type[BaseModel]) -> tuple[BaseModel | None, str | None, int, float | None]:
        """(finding, error, requests, cost) of one review, on a route of its own."""
        from ..gateway.client import ModelCallError, ask_text
        from ..gateway.meter import redact
        from ..gateway.wiring import open_gateway_route

        handle = open_gateway_route(self._routes, self._base, name, self.setup.model, self.setup.upstream, self.setup.price,
                                    REVIEW_SPEND_LIMIT_USD, REVIEW_TOKEN_LIMIT, self.experiment_dir / REVIEWS / LOGS / name,
                                    api=self.setup.api)
        finding, error = None, None
        shape = {} if self.setup.api == "messages" or self.setup.model.startswith("openrouter/") else \
            {"temperature": None, "limit_field": "max_completion_tokens"}
        try:
            for _ in range(ATTEMPTS):
                try:
                    text = ask_text(handle.url, handle.token, self.setup.api, handle.route.model or self.setup.model,
                                    system, user, MAX_TOKENS, TIMEOUT_SEC, "the reviewer", **shape)
                except ModelCallError as exc:
                    error = str(exc)
                    break
                try:
                    finding, error = parse_reply(text, schema), None
                    break
                except ValueError as exc:
                    error = str(exc)
        except Exception as exc:  # noqa: BLE001 - a review that fails is a review without a finding, never a lost run
            error = f"the review failed: {type(exc).__name__}: {exc}"
        finally:
            self._routes.remove(name)
        if error is not None:  # a provider's error page may echo what it was sent: no key of the harness's is kept
            error = redact(error, harness_secrets())[:1000]
        meter = handle.meter
        cost = round(meter.charged_usd, 8) if meter.price is not None else None
        self.run.requests += meter.requests
        if cost is not None and self.run.cost_usd is not None:
            self.run.cost_usd = round(self.run.cost_usd + cost, 8)
        self.run.errors += error is not None
        return finding, error, meter.requests, cost

    def review_trial(self, record: TrialRecord, why: str) -> TrialReview:
        account, shortened = build_account(self.experiment_dir, record)
        finding, error, requests, cost = self._ask(f"review-{record.trial_id}", prompt("trial"), account, Finding)
        review = TrialReview(trial_id=record.trial_id, task=record.task, arm=record.arm, attempt=record.attempt, why=why,
                             finding=finding, error=error, model=self.setup.model, requests=requests, cost_usd=cost,
                             account_chars=len(account), shortened=shortened)
        write_trial_review(self.experiment_dir, review)
        self.run.trials_reviewed += 1
        return review

    def review_pair(self, control: TrialRecord, treatment: TrialRecord) -> PairReview:
        half = ACCOUNT_CHARS // 2
        accounts = [f"=== {label} ===\n" + build_account(self.experiment_dir, r, half)[0]
                    for label, r in (("CONTROL", control), ("TREATMENT", treatment))]
        finding, error, requests, cost = self._ask(f"review-pair-{control.task}-a{control.attempt}", prompt("pair"),
                                                   "\n\n".join(accounts), PairFinding)
        review = PairReview(task=control.task, attempt=control.attempt, control=control.trial_id, treatment=treatment.trial_id,
                            passed="control" if control.outcome == "passed" else "treatment", finding=finding, error=error,
                            model=self.setup.model, requests=requests, cost_usd=cost)
        write_pair_review(self.experiment_dir, review)
        self.run.pairs_reviewed += 1
        return review


def review_run(experiment_dir: Path, setup: ReviewSetup, every_trial: bool = False) -> ReviewRun:
    """Reviews the run on disk: each trial worth reading (every trial with `every_trial`) and each
    discordant pair, then writes the review's own record. An earlier review of the run is replaced
    whole (its findings and its logs): a report never mixes two reviews."""
    records, _ = read_trial_records(experiment_dir)
    replaced = clear_reviews(experiment_dir)
    pairs = discordant_pairs(records)
    in_pairs = {r.trial_id for pair in pairs for r in pair}
    chosen = [(r, why) for r in sorted(records, key=lambda r: r.trial_id)
              if (why := why_review(r, r.trial_id in in_pairs) or ("asked for" if every_trial else None))]
    with Reviewer(experiment_dir, setup) as reviewer:
        reviewer.run.selection = "all" if every_trial else "needed"
        reviewer.run.replaced = sorted(replaced - {r.trial_id for r, _ in chosen})  # their pages lose the old review
        for record, why in chosen:
            reviewer.review_trial(record, why)
        for control, treatment in pairs:
            reviewer.review_pair(control, treatment)
    write_review_run(experiment_dir, reviewer.run)
    return reviewer.run


def clear_reviews(experiment_dir: Path) -> set[str]:
    """Removes an earlier review of the run (its findings and logs; a link in its place is removed,
    never followed), and returns the names it had reviewed (trial ids, and pair-<id> for pairs)."""
    import shutil

    folder = experiment_dir / REVIEWS
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        folder.unlink()
        return set()
    names = set()
    for sub, prefix in ((folder, ""), (folder / "pairs", "pair-")):
        try:
            names |= {prefix + e.name[:-5] for e in os.scandir(sub) if e.name.endswith(".json") and e.name != "run.json"}
        except OSError:
            pass
    shutil.rmtree(folder, ignore_errors=True)
    return names
