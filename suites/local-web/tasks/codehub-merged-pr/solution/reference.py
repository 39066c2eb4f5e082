"""Reference solution: treatment uses the injected list_pull_requests tool; the other arms page
through the merged pull requests with Playwright."""

WANTED = "telemetry buffer overflow when the downlink stalls"
# Follow a link, then look for the pull request on the page it opens.
READ = """
const before = page.url();
await Promise.all([page.waitForURL((url) => url.href !== before), page.locator("%s").first().click()]);
const row = page.locator('tr[data-number]', { hasText: '""" + WANTED + """' });
if (!(await row.count())) return { more: (await page.locator('a[rel=next]').count()) > 0 };
return { number: Number(await row.getAttribute('data-number')),
         author: (await row.locator('td').nth(3).textContent()).replace(/^by /, '') };
"""


async def solve(browser, arm):
    if arm == "treatment":
        out = await browser.webmcp("list_pull_requests", repository="acme/rocket", state="merged")
        hit = next(p for p in out["pulls"] if WANTED in p["title"].lower())
        return {"number": hit["number"], "author": hit["author"]}
    # One call per page opened, as an agent reads and decides: the pull requests, the merged
    # filter, then each page in turn.
    if arm == "control":
        await browser.webmcp_tools()
    await browser.playwright("""
        await Promise.all([page.waitForURL('**/pulls**'), page.locator('text=Pull requests').click()]);
    """)
    found = await browser.playwright(READ % "a[href$='state=merged']")
    while "number" not in found:
        if not found["more"]:
            raise RuntimeError("no such pull request")
        found = await browser.playwright(READ % "a[rel=next]")
    return found
