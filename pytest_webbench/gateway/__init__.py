"""The model gateway: the harness between an agent and its model, as the proxy is between the
agent and its browser. One route per trial on a process's listener; the agent's API key is the
trial's own token (the real key stays in the harness); requests are forwarded as they are and
replies streamed back as they arrive, each reply's usage read from the protocol's own fields,
priced, logged (`model-log.jsonl`) and held against the trial's caps, past which the next request
is refused in the protocol's own error shape, one the agent's CLI treats as final.

- protocols.py: the three wire protocols (OpenAI Responses, Anthropic Messages, chat
  completions): which path is which, where usage sits in a stream, how a refusal looks
- meter.py: usage, prices and a trial's running totals
- routes.py: the per-trial routes (token check, forwarding, streaming, caps, the log)
"""
