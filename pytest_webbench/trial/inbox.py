"""A trial's own e-mail account, as ClawBench gives one to every case's agent (email_credentials.json
beside the user's details and resume, all naming the account's address).

It is made for each trial through PurelyMail's account API and ended with the trial: on
purelymail.com with the run's key (PURELY_MAIL_API_KEY and PURELY_MAIL_DOMAIN, as ClawBench's
runtime reads them), or on the suite's inbox twin, a bundled site that speaks the same API
(suites/local-web/sites/mail.py). The key is the harness's own: it is sent to the API only, never
written into what the agent is given or sees. The client is ours, not the package's
`run_support.email`: that one posts to purelymail.com only, by a module constant; tests hold the
two to the same requests against the twin."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

PURELYMAIL_API = "https://purelymail.com/api/v0"  # clawbench.runner.run_support.email.PURELYMAIL_API
PURELYMAIL_LOGIN = "https://purelymail.com/user/login"  # what the package writes as login_url


class InboxError(RuntimeError):
    """The account could not be made or ended: the harness's side failed, not the agent's."""


@dataclass(frozen=True)
class InboxService:
    provider: str  # what email_credentials.json names
    api_url: str
    token: str = ""  # sent in the API's header only
    domain: str = ""
    login_url: str = PURELYMAIL_LOGIN

    def __repr__(self) -> str:  # a key never reaches a log line or a report by way of an error
        return f"InboxService({self.provider!r}, {self.api_url!r}, domain={self.domain!r})"


@dataclass(frozen=True)
class InboxAccount:
    email: str
    password: str
    service: InboxService

    def credentials(self) -> dict[str, str]:
        """email_credentials.json, in the package's own fields and order."""
        return {"email": self.email, "password": self.password, "login_url": self.service.login_url,
                "provider": self.service.provider}

    def __repr__(self) -> str:
        return f"InboxAccount({self.email!r}, {self.service!r})"


def live_service(environ=os.environ) -> InboxService | None:
    """purelymail.com, where the run has its key and domain; None otherwise (no account is given)."""
    key = environ.get("PURELY_MAIL_API_KEY") or environ.get("PURELYMAIL_API_KEY")
    domain = environ.get("PURELY_MAIL_DOMAIN") or environ.get("PURELYMAIL_DOMAIN")
    if not key or not domain:
        return None
    return InboxService("PurelyMail", environ.get("WEBBENCH_PURELYMAIL_API", PURELYMAIL_API), key, domain)


def twin_service(title: str, served: str, browser_url: str, token: str, domain: str) -> InboxService:
    """The suite's inbox twin: its API where the harness serves it, its login page where the browser reaches it."""
    return InboxService(title, f"{served}/api/v0", token, domain, f"{browser_url}/login")


async def _request(service: InboxService, endpoint: str, body: dict) -> dict:
    """One API call as PurelyMail takes it: a JSON POST with the token in its header; its answer
    is `{"type": "success", ...}` or `{"type": "error", "code", "message"}` (run_support/email.py)."""
    import httpx

    try:
        async with httpx.AsyncClient(timeout=15, follow_redirects=False, trust_env=False) as client:
            reply = await client.post(f"{service.api_url}/{endpoint}", content=json.dumps(body).encode(),
                                      headers={"Purelymail-Api-Token": service.token, "Content-Type": "application/json"})
        result = reply.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise InboxError(f"{service.provider} {endpoint}: {type(exc).__name__}: {str(exc)[:200]}") from None
    if not isinstance(result, dict) or result.get("type") != "success":
        said = result if isinstance(result, dict) else {}
        raise InboxError(f"{service.provider} {endpoint} failed (HTTP {reply.status_code}"
                         f"{', ' + str(said.get('code'))[:80] if said.get('code') else ''}"
                         f"{': ' + str(said.get('message'))[:200] if said.get('message') else ''})")
    return result


def new_account(service: InboxService) -> InboxAccount:
    """An account's name and password, as the package's `create_email` makes them; named before it
    is asked for, so that one whose reply never came can still be deleted."""
    return InboxAccount(f"cb{uuid.uuid4().hex[:12]}@{service.domain}", secrets.token_urlsafe(16), service)


async def open_account(account: InboxAccount) -> None:
    await _request(account.service, "createUser", {
        "userName": account.email.split("@", 1)[0], "domainName": account.service.domain, "password": account.password,
        "enablePasswordReset": False, "sendWelcomeEmail": False})


async def close_account(account: InboxAccount) -> None:
    await _request(account.service, "deleteUser", {"userName": account.email})


def given_with_account(task_given: Path | None, account: InboxAccount, out: Path) -> Path:
    """The task's given files for this trial (`task_given`: the task's own, if it has any): the
    case's own as they are, and the user's details, resume and e-mail credentials made by the
    package's `prepare_personal_info` for the account's address (the credentials then name where
    this account is read)."""
    from ..design.clawbench import personal_files_for

    out.mkdir(parents=True, exist_ok=True)
    for path in task_given.iterdir() if task_given is not None else ():
        if path.is_file() and not path.is_symlink():
            shutil.copyfile(path, out / path.name)
    for path, name in personal_files_for(out / ".made", account.email, account.password):
        shutil.copyfile(path, out / name)
    shutil.rmtree(out / ".made")
    (out / "email_credentials.json").write_text(json.dumps(account.credentials(), indent=2))
    return out
