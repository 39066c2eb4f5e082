"""Reference solution: treatment sends the quote with the injected request_quote tool (its second
step is blocked, so the tool reports a failed fetch); the others fill in both steps of the form."""

OPEN = "await page.goto(new URL('/quote', page.url()).href); return await page.title();"
FILL = """
await page.fill('input[name=item]', 'MK-1007');
await page.fill('input[name=quantity]', '3');
await Promise.all([page.waitForURL('**/quote/shipping**'), page.click('#next-step')]);
await page.fill('input[name=name]', 'Dana Webb');
await page.fill('input[name=postcode]', 'ZE915');
const blocked = page.waitForEvent('requestfailed', (r) => r.url().includes('/quote/shipping') && r.method() === 'POST');
await page.click('#send-quote', { noWaitAfter: true });
return (await blocked).failure().errorText;
"""


async def solve(browser, arm):
    if arm == "treatment":
        try:
            await browser.webmcp("request_quote", item="MK-1007", quantity=3, name="Dana Webb", postcode="ZE915")
        except RuntimeError as exc:  # the submission was intercepted: the tool's fetch never got its reply
            if "fetch" not in str(exc).lower():
                raise
        return {}
    if arm == "control":
        await browser.webmcp_tools()
    await browser.playwright(OPEN)  # the form first, as an agent reads a page before filling it in
    await browser.playwright(FILL)
    return {}
