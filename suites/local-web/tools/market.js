// Treatment tools for Marketa, in Kernel's custom-tool form: each does in one call what the
// listing, product pages, deals feed or quote form take many steps to do.
[
  {
    kind: 'page',
    match: { url_patterns: ['http://market.localhost/*'] },
    tool: {
      name: 'find_products',
      description: 'Marketa products matching a category, brand, maximum price (cents) and minimum rating, sorted by price, rating, reviews or release date; with reviews, stock, warranty and release date.',
      inputSchema: {
        type: 'object',
        properties: {
          category: { type: 'string' }, brand: { type: 'string' }, max_price_cents: { type: 'integer' },
          min_rating: { type: 'number' }, sort: { type: 'string', enum: ['price', '-price', 'rating', 'reviews', 'released'] },
          limit: { type: 'integer', minimum: 1, maximum: 96 },
        },
      },
    },
    execute: async ({ category, brand, max_price_cents, min_rating, sort, limit }) => {
      const query = new URLSearchParams();
      if (category) query.set('category', category);
      if (brand) query.set('brand', brand);
      const listed = await (await fetch('/api/products?' + query)).json();
      const wanted = listed.filter((p) => (max_price_cents == null || p.price_cents <= max_price_cents)
        && (min_rating == null || p.rating >= min_rating));
      const full = await Promise.all(wanted.map(async (p) => (await fetch('/api/products/' + p.id)).json()));
      const keys = { price: (p) => p.price_cents, '-price': (p) => -p.price_cents, rating: (p) => -p.rating,
        reviews: (p) => -p.reviews, released: (p) => -Date.parse(p.released) };
      if (sort) full.sort((a, b) => keys[sort](a) - keys[sort](b));
      return { products: full.slice(0, limit || full.length), matched: full.length };
    },
  },
  {
    kind: 'page',
    match: { url_patterns: ['http://market.localhost/*'] },
    tool: {
      name: 'list_deals',
      description: "Every deal on Marketa's deals page (which loads them as you scroll), biggest discount first.",
      inputSchema: { type: 'object', properties: {} },
    },
    execute: async () => {
      const all = [];
      for (let offset = 0; ; ) {
        const batch = await (await fetch('/api/deals?limit=8&offset=' + offset)).json();
        all.push(...batch.deals);
        offset += batch.deals.length;
        if (!batch.deals.length || offset >= batch.total) break;
      }
      return { deals: all.sort((a, b) => b.percent_off - a.percent_off) };
    },
  },
  {
    kind: 'page',
    match: { url_patterns: ['http://market.localhost/*'] },
    tool: {
      name: 'request_quote',
      description: 'Send a quote request (item id, quantity, name, postcode such as AB123); returns its reference.',
      inputSchema: {
        type: 'object',
        properties: { item: { type: 'string' }, quantity: { type: 'integer' }, name: { type: 'string' }, postcode: { type: 'string' } },
        required: ['item', 'quantity', 'name', 'postcode'],
      },
    },
    execute: async ({ item, quantity, name, postcode }) => {
      const step1 = await fetch('/quote', { method: 'POST', body: new URLSearchParams({ item, quantity: String(quantity) }) });
      if (!step1.url.includes('/quote/shipping')) throw new Error('the quote form refused the item or quantity');
      const step2 = await fetch(step1.url, { method: 'POST', body: new URLSearchParams({ name, postcode }) });
      const ref = step2.url.split('/quote/done/')[1];
      if (!ref) throw new Error('the shipping form refused the name or postcode');
      return { reference: ref };
    },
  },
]
