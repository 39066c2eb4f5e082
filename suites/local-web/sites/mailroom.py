"""The mail the bundled sites send, held in this process for the inbox twin (mail.py) to show.

The sites are served in one process per worker, so a site that e-mails a code (wiki.py's verified
sign-up) hands it here and the twin reads it from here. Mail to an address without an account is
dropped, as a real server bounces it: only the trial's own account receives anything."""

from __future__ import annotations

import threading
import time

ACCOUNTS: dict[str, str] = {}  # address (lowercased) -> password
BOXES: dict[str, list[dict]] = {}  # address -> its messages, oldest first
_LOCK = threading.Lock()


def open_account(address: str, password: str) -> bool:
    """False where the address is taken (PurelyMail refuses a user that exists)."""
    with _LOCK:
        if address.lower() in ACCOUNTS:
            return False
        ACCOUNTS[address.lower()] = password
        BOXES[address.lower()] = []
        return True


def close_account(address: str) -> bool:
    with _LOCK:
        BOXES.pop(address.lower(), None)
        return ACCOUNTS.pop(address.lower(), None) is not None


def deliver(to: str, sender: str, subject: str, body: str) -> bool:
    """Whether the message was delivered (an address with an account)."""
    with _LOCK:
        box = BOXES.get(to.strip().lower())
        if box is None:
            return False
        box.append({"from": sender, "subject": subject, "body": body, "at": time.strftime("%H:%M:%S")})
        return True


def messages(address: str) -> list[dict]:
    with _LOCK:
        return list(BOXES.get(address.lower(), []))


def password_matches(address: str, password: str) -> bool:
    with _LOCK:
        known = ACCOUNTS.get(address.strip().lower())
    return known is not None and password == known
