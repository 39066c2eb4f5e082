"""The harness's own calls to a model through its gateway (the judge's, the reviewer's): one
request, its reply's text, in the API's own terms. Never the agent's: its CLI talks to the gateway
itself. Each caller has a route of its own, so its tokens and spend are metered and capped apart."""

from __future__ import annotations


class ModelCallError(Exception):
    """The model gave no reply the caller can read (unreachable, refused, not JSON)."""


def request_for(api: str, model: str, system: str, user: str, max_tokens: int) -> tuple[str, dict]:
    """The path (below the route's base URL) and body of one call, in the API's own terms."""
    if api == "messages":
        return "/v1/messages", {"model": model, "max_tokens": max_tokens, "system": system,
                                "messages": [{"role": "user", "content": user}]}
    return "/chat/completions", {"model": model, "max_tokens": max_tokens, "temperature": 0, "stream": False,
                                 "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}


def reply_text(api: str, reply: dict) -> str:
    if api == "messages":
        return "".join(block.get("text", "") for block in reply.get("content") or [] if isinstance(block, dict))
    choices = reply.get("choices") or [{}]
    return ((choices[0] or {}).get("message") or {}).get("content") or ""


def ask_text(base_url: str, token: str, api: str, model: str, system: str, user: str, max_tokens: int,
             timeout: float, who: str) -> str:
    """One call's reply text; `who` names the caller in its errors ("the judge (strict)")."""
    import httpx

    path, body = request_for(api, model, system, user, max_tokens)
    headers = {"x-api-key": token, "anthropic-version": "2023-06-01"} if api == "messages" else {"authorization": f"Bearer {token}"}
    try:
        response = httpx.post(base_url + path, json=body, headers=headers, timeout=timeout)
    except httpx.HTTPError as exc:
        raise ModelCallError(f"{who} could not be reached: {exc}") from None
    if response.status_code != 200:
        raise ModelCallError(f"{who} answered HTTP {response.status_code}: {response.text[:300]}")
    try:
        reply = response.json()
    except ValueError:
        raise ModelCallError(f"{who} answered something that is not JSON: {response.text[:200]!r}") from None
    return reply_text(api, reply if isinstance(reply, dict) else {})
