"""Reference solution: treatment reads the infobox with the injected get_infobox tool; the others
search and read the article with Playwright."""


async def solve(browser, arm):
    if arm == "treatment":
        facts = (await browser.webmcp("get_infobox", title="Corvain"))["facts"]
        return {"population": int(facts["Population"].replace(",", ""))}
    if arm == "control":
        await browser.webmcp_tools()
    await browser.playwright("""
        await page.fill('input[name=q]', 'Corvain');
        await Promise.all([page.waitForURL('**/search**'), page.press('input[name=q]', 'Enter')]);
    """)
    text = await browser.playwright("""
        await Promise.all([page.waitForURL('**/wiki/**'), page.click('text=Corvain')]);
        return await page.locator('.infobox tr', { hasText: 'Population' }).locator('td').textContent();
    """)
    return {"population": int(text.replace(",", ""))}
