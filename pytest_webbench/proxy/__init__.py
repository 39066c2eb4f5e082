"""The MCP call proxy: the only way an agent reaches the browser.

`relay` holds one trial's session (the arm's rules, the call cap, WebMCP accounting, the log),
`rules` the checks themselves, `upstream` the transports behind it (streamable HTTP, stdio),
`http_endpoint` the per-trial HTTP routes the fixture serves, `stdio` the standalone mode
(`python -m pytest_webbench.proxy`), `framing` line limits, `log` the call log and its reader.
"""
