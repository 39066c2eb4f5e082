"""Reference solution: every arm follows the Random article link; treatment then reads the
infobox with the injected get_infobox tool."""


async def solve(browser, arm):
    title = await browser.playwright("""
        await Promise.all([page.waitForURL('**/wiki/**'), page.click('text=Random article')]);
        return (await page.textContent('#firstHeading')).trim();
    """)
    if arm == "treatment":
        facts = (await browser.webmcp("get_infobox", title=title))["facts"]
        return {"title": title, "infobox_rows": len(facts)}
    rows = await browser.playwright("return await page.locator('.infobox tr').count();")
    return {"title": title, "infobox_rows": rows}
