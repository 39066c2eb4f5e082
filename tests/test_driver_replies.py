"""A page can hand the harness's Node driver any value (a getter returning 70 MB, an array nested
5,000 deep, a cycle): a reply no one can read must fail its own call, never the driver, which
serves every trial of its worker (browsers/node_driver.py; serveLines in browsers/sealed/webmcp.js)."""

from __future__ import annotations

import asyncio
import json

import pytest

from pytest_webbench.browsers import node_driver
from pytest_webbench.browsers.base import BackendError
from pytest_webbench.browsers.pod import SEALED_JS

FAKE_DRIVER = """
const W = require(%s);
W.serveLines({
  ping: async () => 'pong',
  deep: async () => { let a = []; for (let i = 0; i < 5000; i++) a = [a]; return a; },
  huge: async () => 'x'.repeat(17 * 1024 * 1024),
  cycle: async () => { const o = {}; o.self = o; return o; },
}, () => process.exit(0));
"""


def test_a_reply_no_one_can_read_fails_its_own_call_and_the_driver_serves_on(tmp_path, monkeypatch):
    fake = tmp_path / "driver.js"
    fake.write_text(FAKE_DRIVER % json.dumps(str(SEALED_JS / "webmcp.js")))
    monkeypatch.setattr(node_driver, "DRIVER_JS", fake)

    async def scenario() -> None:
        driver = node_driver.NodeDriver()
        try:
            # nested past Python's parser: its call fails at once, not after the call's timeout
            with pytest.raises(BackendError, match="could not be read .RecursionError"):
                await driver.call("deep", timeout=60)
            assert await driver.call("ping") == "pong"
            with pytest.raises(BackendError, match="over the 16777216 a reply may be"):  # 17 MB of text: kept under the line limit
                await driver.call("huge", timeout=60)
            with pytest.raises(BackendError, match="could not be made JSON"):
                await driver.call("cycle", timeout=60)
            assert await driver.call("ping") == "pong"
        finally:
            await driver.close()

    asyncio.run(scenario())
