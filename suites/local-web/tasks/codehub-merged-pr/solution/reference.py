"""Reference solution: treatment uses the injected list_pull_requests tool; the other arms page
through the merged pull requests with Playwright."""

WANTED = "telemetry buffer overflow when the downlink stalls"


async def solve(browser, arm):
    if arm == "treatment":
        out = await browser.webmcp("list_pull_requests", repository="acme/rocket", state="merged")
        hit = next(p for p in out["pulls"] if WANTED in p["title"].lower())
        return {"number": hit["number"], "author": hit["author"]}
    # Each click waits for the page it opens (count() does not wait; see shop-price's solution).
    return await browser.playwright(f"""
        const follow = async (locator) => {{
          const before = page.url();
          await Promise.all([page.waitForURL((url) => url.href !== before), locator.click()]);
        }};
        await follow(page.locator('text=Pull requests'));
        await follow(page.locator('a[href$="state=merged"]'));
        for (;;) {{
          const row = page.locator('tr[data-number]', {{ hasText: {WANTED!r} }});
          if (await row.count()) {{
            return {{ number: Number(await row.getAttribute('data-number')),
                      author: (await row.locator('td').nth(3).textContent()).replace(/^by /, '') }};
          }}
          const next = page.locator('a[rel=next]');
          if (!(await next.count())) throw new Error('not found');
          await follow(next);
        }}
    """)
