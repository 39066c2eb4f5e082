"""A trial's e-mail account (pytest_webbench/trial/inbox.py) and the inbox twin it is made on
(suites/local-web/sites/mail.py): the twin must take PurelyMail's API as ClawBench's own client
sends it, so that the harness's client, tested against the twin, is right for purelymail.com too."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from pytest_webbench.service_loop import ServiceLoop
from pytest_webbench.trial import inbox

SITES = Path(__file__).resolve().parents[1] / "suites" / "local-web" / "sites"


@pytest.fixture(scope="module")
def sites():
    import sys

    sys.path.insert(0, str(SITES))
    import mail
    import mailroom
    import wiki

    yield mail, mailroom, wiki
    sys.path.remove(str(SITES))


@pytest.fixture
def twin(sites):
    """The twin served over real HTTP, every API request it receives kept as it arrived."""
    mail = sites[0]
    app = mail.create_app()
    seen: list[dict] = []

    async def recording(scope, receive, send):
        if scope["type"] == "http" and scope["path"].startswith("/api/"):
            body = b""
            while True:
                message = await receive()
                body += message.get("body", b"")
                if not message.get("more_body"):
                    break
            seen.append({"path": scope["path"], "method": scope["method"], "headers": dict(scope["headers"]), "body": body})

            async def replay():
                return {"type": "http.request", "body": body, "more_body": False}
            return await app(scope, replay, send)
        return await app(scope, receive, send)

    loop = ServiceLoop()
    url = loop.serve(recording, "inbox twin")
    yield app, url, seen, loop
    loop.close()


def _service(app, url: str, token: str | None = None) -> inbox.InboxService:
    return inbox.twin_service("Postbox", url, "http://mail.localhost:1", token or app.state.purelymail_token,
                              app.state.purelymail_domain)


def test_the_twin_takes_clawbench_s_own_client_and_ours_sends_what_it_sends(twin, sites, monkeypatch):
    from clawbench.runner.run_support import email as theirs

    app, url, seen, loop = twin
    mailroom = sites[1]
    monkeypatch.setattr(theirs, "PURELYMAIL_API", f"{url}/api/v0")  # its client, pointed at the twin
    address, password = theirs.create_email(app.state.purelymail_token, app.state.purelymail_domain)
    assert mailroom.password_matches(address, password)
    theirs.delete_email(app.state.purelymail_token, address)
    assert not mailroom.password_matches(address, password)
    service = _service(app, url)
    account = inbox.new_account(service)
    loop.run(inbox.open_account(account))
    assert mailroom.password_matches(account.email, account.password)
    loop.run(inbox.close_account(account))
    assert not mailroom.password_matches(account.email, account.password)
    # request for request: the same endpoints, method, token header, content type and body fields and types
    def shape(request):
        body = json.loads(request["body"])
        return (request["path"], request["method"], request["headers"][b"purelymail-api-token"],
                request["headers"][b"content-type"], {k: type(v).__name__ for k, v in body.items()})
    assert [shape(r) for r in seen[:2]] == [shape(r) for r in seen[2:]] and len(seen) == 4
    made = [json.loads(r["body"]) for r in (seen[0], seen[2])]
    assert all(m["userName"].startswith("cb") and len(m["userName"]) == 14 and m["domainName"] == "mail.localhost" for m in made)


def test_a_refused_request_is_an_error_naming_the_provider_and_never_the_token(twin):
    app, url, _, loop = twin
    with pytest.raises(inbox.InboxError, match=r"Postbox createUser failed \(HTTP 401, unauthorized: Invalid API token\)") as err:
        loop.run(inbox.open_account(inbox.new_account(_service(app, url, token="not-the-token-5d1"))))
    assert "not-the-token-5d1" not in str(err.value)
    account = inbox.new_account(_service(app, url))
    loop.run(inbox.open_account(account))
    gone = inbox.InboxAccount("cbnothere0000@mail.localhost", "x", account.service)
    with pytest.raises(inbox.InboxError, match="userNotFound"):
        loop.run(inbox.close_account(gone))
    assert app.state.purelymail_token not in repr(account) and account.password not in repr(account)


def test_nothing_answers_is_an_inbox_error_too():
    service = inbox.InboxService("PurelyMail", "http://127.0.0.1:9/api/v0", "k", "example.org")
    with pytest.raises(inbox.InboxError, match="PurelyMail createUser: ConnectError"):
        asyncio.run(inbox.open_account(inbox.new_account(service)))


def test_the_live_service_needs_the_key_and_the_domain_as_clawbench_s_runtime_reads_them():
    assert inbox.live_service({}) is None
    assert inbox.live_service({"PURELY_MAIL_API_KEY": "k"}) is None
    assert inbox.live_service({"PURELYMAIL_DOMAIN": "d.example"}) is None
    live = inbox.live_service({"PURELYMAIL_API_KEY": "secret-key-77", "PURELY_MAIL_DOMAIN": "d.example"})
    assert (live.api_url, live.login_url, live.provider, live.domain) == (
        "https://purelymail.com/api/v0", "https://purelymail.com/user/login", "PurelyMail", "d.example")
    assert "secret-key-77" not in repr(live)


def test_the_trial_s_given_files_name_its_account(tmp_path):
    task_given = tmp_path / "given"
    task_given.mkdir()
    (task_given / "account.json").write_text('{"case": "own file"}')
    (task_given / "alex_green_personal_info.json").write_text('{"contact": {"email": "old@example.org"}}')
    service = inbox.InboxService("Postbox", "http://127.0.0.1:1/api/v0", "tok-9", "mail.localhost", "http://mail.localhost:5/login")
    account = inbox.InboxAccount("cb0123456789ab@mail.localhost", "pw-3f", service)
    assert sorted(p.name for p in inbox.given_with_account(None, account, tmp_path / "bare").iterdir()) == [
        "alex_green_personal_info.json", "alex_green_resume.pdf", "email_credentials.json"]  # a task with no files of its own
    out = inbox.given_with_account(task_given, account, tmp_path / "trial" / "my-info")
    assert sorted(p.name for p in out.iterdir()) == ["account.json", "alex_green_personal_info.json",
                                                   "alex_green_resume.pdf", "email_credentials.json"]
    assert json.loads((out / "email_credentials.json").read_text()) == {
        "email": "cb0123456789ab@mail.localhost", "password": "pw-3f", "login_url": "http://mail.localhost:5/login",
        "provider": "Postbox"}
    person = json.loads((out / "alex_green_personal_info.json").read_text())
    assert person["contact"]["email"] == "cb0123456789ab@mail.localhost" and "online_accounts" not in person
    assert (out / "alex_green_resume.pdf").read_bytes().startswith(b"%PDF")
    assert (out / "account.json").read_text() == '{"case": "own file"}'
    assert "tok-9" not in "".join(p.read_text(errors="replace") for p in out.iterdir())


def test_mail_reaches_only_its_own_account_and_only_its_owner_reads_it(sites):
    from starlette.testclient import TestClient

    mail, mailroom, wiki = sites
    assert mailroom.open_account("cbaaaa@mail.localhost", "pw-a") and mailroom.open_account("cbbbbb@mail.localhost", "pw-b")
    assert not mailroom.open_account("CBaaaa@mail.localhost", "other")  # taken, whatever its case
    with TestClient(wiki.create_app()) as site:
        site.post("/join", data={"email": "cbaaaa@mail.localhost"})
        site.post("/join", data={"email": "nobody@mail.localhost"})  # no account: dropped
    assert len(mailroom.messages("cbaaaa@mail.localhost")) == 1 and mailroom.messages("cbbbbb@mail.localhost") == []
    with TestClient(mail.create_app()) as webmail:
        assert "Wrong email or password" in webmail.post("/login", data={"email": "cbaaaa@mail.localhost", "password": "pw-b"}).text
        assert webmail.get("/", follow_redirects=False).status_code == 303  # not signed in
        webmail.post("/login", data={"email": "cbbbbb@mail.localhost", "password": "pw-b"})
        assert "No mail yet" in webmail.get("/").text and "No such message" in webmail.get("/message/0").text
        webmail.post("/logout")
        webmail.post("/login", data={"email": "cbaaaa@mail.localhost", "password": "pw-a"})
        assert "Your Wikipedium code" in webmail.get("/").text and "Your code to join" in webmail.get("/message/0").text


def test_the_verified_sign_up_shows_its_ticket_only_for_the_code_it_sent(sites):
    import re

    from starlette.testclient import TestClient

    _, mailroom, wiki = sites
    mailroom.open_account("cbcccc@mail.localhost", "pw-c")
    with TestClient(wiki.create_app()) as site:
        site.post("/join", data={"email": "cbcccc@mail.localhost"})
        code = re.search(r"\d{6}", mailroom.messages("cbcccc@mail.localhost")[-1]["body"]).group(0)
        wrong = f"{(int(code) + 1) % 10**6:06d}"
        refused = site.post("/join/verify", data={"email": "cbcccc@mail.localhost", "code": wrong}).text
        assert wiki.VERIFIED_TICKET not in refused and "not the one we sent" in refused
        assert wiki.VERIFIED_TICKET in site.post("/join/verify", data={"email": "cbcccc@mail.localhost", "code": code}).text
        # the account is made only with the ticket
        assert "Verify your address first" in site.post("/join/confirm", data={"username": "x", "ticket": "guess"}).text


def test_no_page_guesses_its_way_to_the_ticket(sites):
    """Five wrong codes lock the address, whatever new codes it asks for; at most three are sent;
    an address with no mailbox is never sent one (nor kept)."""
    import re

    from starlette.testclient import TestClient

    _, mailroom, wiki = sites
    mailroom.open_account("cbdddd@mail.localhost", "pw-d")
    with TestClient(wiki.create_app()) as site:
        def ask() -> str:
            site.post("/join", data={"email": "CBdddd@mail.localhost"})  # any case: one address
            return re.search(r"\d{6}", mailroom.messages("cbdddd@mail.localhost")[-1]["body"]).group(0)
        for _ in range(2):  # wrong codes spread over fresh codes still count
            code = ask()
            for _ in range(2):
                site.post("/join/verify", data={"email": "cbdddd@mail.localhost", "code": f"{(int(code) + 1) % 10**6:06d}"})
        code = ask()  # the third and last code
        assert "Too many codes" in site.post("/join", data={"email": "cbdddd@mail.localhost"}).text
        site.post("/join/verify", data={"email": "cbdddd@mail.localhost", "code": f"{(int(code) + 1) % 10**6:06d}"})
        assert wiki.VERIFIED_TICKET not in site.post("/join/verify", data={"email": "cbdddd@mail.localhost", "code": code}).text
        assert len(mailroom.messages("cbdddd@mail.localhost")) == 3
        for n in range(50):
            site.post("/join", data={"email": f"nobody{n}@mail.localhost"})
        assert not any(k.startswith("nobody") for k in (*wiki.PENDING, *wiki.CODES_SENT, *wiki.WRONG_CODES))


def test_a_failure_after_the_account_is_made_ends_it_and_keeps_the_task_s_files(twin, sites, tmp_path, monkeypatch):
    """Between the account and the trial's own files a failure (a full disk) leaves the task's
    folder as it was, the account deleted and no folder of the trial's behind."""
    from pytest_webbench.trial import fixtures
    from pytest_webbench.trial.browser_session import BrowserSessionHandle

    app, url, _, loop = twin
    mailroom = sites[1]
    task_given = tmp_path / "task" / "given"
    task_given.mkdir(parents=True)
    (task_given / "alex_green_personal_info.json").write_text("{}")

    class Services:  # what the two helpers use of RunServices: its loop and where accounts are made
        def __init__(self):
            self.loop = loop

        def inbox_service(self, name):
            return _service(app, url)

    class Spec:
        class task:
            class meta:
                inbox = "mail"

    def full_disk(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(inbox, "given_with_account", full_disk)
    handle = BrowserSessionHandle("s", "http://x", Services(), given_dir=task_given)
    with pytest.raises(OSError, match="No space left"):
        fixtures._give_an_inbox(handle, Services(), Spec())
    made = handle.inbox
    assert mailroom.password_matches(made.email, made.password)
    fixtures._end_the_inbox(handle, tmp_path / "exp")
    assert task_given.is_dir() and (task_given / "alex_green_personal_info.json").exists()
    assert not mailroom.password_matches(made.email, made.password)
    assert not (tmp_path / "exp").exists()  # deleted: nothing listed as left behind
