"""Reference solution (placebo: every arm does the same, with Playwright)."""


async def solve(browser, arm):
    tag = await browser.playwright("""
        await page.click('a[href="/nimbus/raincheck"]');
        await page.click('text=Releases');
        return (await page.locator('.release .tag').first().textContent()).trim();
    """)
    return {"tag": tag}
