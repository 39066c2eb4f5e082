"""The harness's own calls to a model through its gateway (the judge's, the reviewer's): one
request, its reply's text, in the API's own terms. Never the agent's: its CLI talks to the gateway
itself. Each caller has a route of its own, so its tokens and spend are metered and capped apart."""

from __future__ import annotations


class ModelCallError(Exception):
    """The model gave no reply the caller can read (unreachable, refused, not JSON)."""


def request_for(api: str, model: str, system: str, user: str, max_tokens: int, temperature: float | None = 0,
                limit_field: str = "max_tokens") -> tuple[str, dict]:
    """The path (below the route's base URL) and body of one call, in the API's own terms. On chat,
    `limit_field` max_completion_tokens and no temperature suit OpenAI's reasoning models, which
    refuse max_tokens and any temperature but 1 (the reviewer asks so; the judge asks as ClawBench does)."""
    if api == "messages":
        return "/v1/messages", {"model": model, "max_tokens": max_tokens, "system": system,
                                "messages": [{"role": "user", "content": user}]}
    body = {"model": model, limit_field: max_tokens, "stream": False,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}
    if temperature is not None:
        body["temperature"] = temperature
    return "/chat/completions", body


def reply_text(api: str, reply: dict) -> str:
    """The reply's text, whatever shape a provider gave it: text parts joined, anything else empty."""
    def text_of(content) -> str:
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return "".join(part.get("text", "") if isinstance(part, dict) and isinstance(part.get("text"), str) else ""
                           for part in content)
        return ""

    if not isinstance(reply, dict):
        return ""
    if api == "messages":
        return text_of(reply.get("content"))
    choices = reply.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, dict) else None
    return text_of(message.get("content")) if isinstance(message, dict) else ""


def ask_text(base_url: str, token: str, api: str, model: str, system: str, user: str, max_tokens: int,
             timeout: float, who: str, **shape) -> str:
    """One call's reply text; `who` names the caller in its errors ("the judge (strict)"); `shape`
    goes to `request_for`."""
    import httpx

    path, body = request_for(api, model, system, user, max_tokens, **shape)
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
    return reply_text(api, reply)
