"""Reference solution: treatment makes the account with the injected create_account tool; control
fills in the sign-up form through the site's own declarative WebMCP tool (start_signup) and confirms
on the page that follows; the playwright arm fills in and confirms both pages itself."""

OPEN = "await page.goto(new URL('/signup', page.url()).href); return page.url();"
FORM = """
await page.fill('input[name=username]', 'riverwatcher');
await page.fill('input[name=email]', 'dana.webb@example.org');
await Promise.all([page.waitForURL('**/signup'), page.click('#signup-next')]);
"""
CONFIRM = """
await page.waitForSelector('#signup-confirm');
const blocked = page.waitForEvent('requestfailed', (r) => r.url().includes('/signup/confirm') && r.method() === 'POST');
await page.click('#signup-confirm', { noWaitAfter: true });
return (await blocked).failure().errorText;
"""


async def solve(browser, arm):
    if arm == "treatment":
        await browser.webmcp("create_account", username="riverwatcher", email="dana.webb@example.org", newsletter=False)
        return {}
    await browser.playwright(OPEN)
    if arm == "control":
        await browser.webmcp_tools()  # on the sign-up page: its form is a tool
        await browser.webmcp("start_signup", username="riverwatcher", email="dana.webb@example.org")
    else:
        await browser.playwright(FORM)
    await browser.playwright(CONFIRM)
    return {}
