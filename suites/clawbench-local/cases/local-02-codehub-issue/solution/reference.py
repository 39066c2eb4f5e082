"""Reference solution: treatment opens the issue with the injected open_issue tool; the others fill
in the new-issue form, whose script sends it (blocked by the harness: nothing waits for a reply)."""

OPEN = "await page.goto(new URL('/acme/rocket/issues/new', page.url()).href); return await page.title();"
FORM = """
await page.fill('input[name=title]', 'Telemetry drops on reconnect');
await page.fill('textarea[name=body]', 'Telemetry stops after the uplink reconnects.');
await page.check('input[name=label][value=bug]');
// where no check matches (an ungradable case), the request is not blocked: give up waiting soon
const blocked = page.waitForEvent('requestfailed', { predicate: (r) => r.url().includes('/issues') && r.method() === 'POST', timeout: 8000 });
await page.click('#submit-issue', { noWaitAfter: true });
return (await blocked).failure().errorText;
"""


async def solve(browser, arm):
    if arm == "treatment":
        await browser.webmcp("open_issue", repository="acme/rocket", title="Telemetry drops on reconnect",
                             body="Telemetry stops after the uplink reconnects.", labels=["bug"])
        return {}
    if arm == "control":
        await browser.webmcp_tools()
    await browser.playwright(OPEN)  # the form first, as an agent reads a page before filling it in
    await browser.playwright(FORM)
    return {}
