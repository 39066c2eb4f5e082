// Treatment tools for Shoply, in Kernel's custom-tool form.
[
  {
    kind: 'page',
    match: { url_patterns: ['http://shop.localhost/*'] },
    tool: {
      name: 'find_products',
      description: 'Find Shoply products whose names contain all the given words; returns sku, name and price in cents, cheapest first.',
      inputSchema: { type: 'object', properties: { words: { type: 'string' } }, required: ['words'] },
    },
    execute: async ({ words }) => {
      const found = [];
      for (let page = 1; page < 50; page++) {
        const res = await fetch(`/search?q=${encodeURIComponent(words)}&page=${page}`);
        const doc = new DOMParser().parseFromString(await res.text(), 'text/html');
        for (const card of doc.querySelectorAll('.product')) {
          found.push({
            sku: card.dataset.sku,
            name: card.querySelector('a').textContent,
            price_cents: Math.round(Number(card.querySelector('.price').textContent.replace('$', '')) * 100),
          });
        }
        if (!doc.querySelector('a[rel=next]')) break;
      }
      return { products: found.sort((a, b) => a.price_cents - b.price_cents) };
    },
  },
  {
    kind: 'page',
    match: { url_patterns: ['http://shop.localhost/*'] },
    tool: {
      name: 'current_coupons',
      description: 'The coupon codes Shoply advertises on its category pages, with their discounts.',
      inputSchema: { type: 'object', properties: {} },
    },
    execute: async () => {
      const home = new DOMParser().parseFromString(await (await fetch('/')).text(), 'text/html');
      const coupons = [];
      for (const link of home.querySelectorAll('main a[href^="/c/"]')) {
        const doc = new DOMParser().parseFromString(await (await fetch(link.getAttribute('href'))).text(), 'text/html');
        for (const promo of doc.querySelectorAll('.promo')) {
          coupons.push({ code: promo.querySelector('.coupon-code').textContent, offer: promo.textContent.trim() });
        }
      }
      return { coupons };
    },
  },
  {
    kind: 'page',
    match: { url_patterns: ['http://shop.localhost/*'] },
    tool: {
      name: 'apply_coupon',
      description: 'Apply a coupon code to the cart; returns the new cart total.',
      inputSchema: { type: 'object', properties: { code: { type: 'string' } }, required: ['code'] },
    },
    execute: async ({ code }) => {
      const res = await fetch('/cart/coupon', { method: 'POST', body: new URLSearchParams({ code }) });
      if (res.url.includes('coupon=invalid')) throw new Error(`the cart refused coupon ${code}`);
      const doc = new DOMParser().parseFromString(await res.text(), 'text/html');
      return { total: doc.querySelector('#cart-total').textContent };
    },
  },
  {
    kind: 'page',
    match: { url_patterns: ['http://shop.localhost/*'] },
    tool: {
      name: 'add_to_cart',
      description: 'Add a quantity of a product (by sku) to the cart; returns the cart total.',
      inputSchema: {
        type: 'object',
        properties: { sku: { type: 'string' }, quantity: { type: 'integer', minimum: 1, maximum: 9 } },
        required: ['sku', 'quantity'],
      },
    },
    execute: async ({ sku, quantity }) => {
      const body = new URLSearchParams({ sku, qty: String(quantity) });
      const res = await fetch('/cart/add', { method: 'POST', body });
      if (!res.ok) throw new Error(`could not add ${sku}`);
      const doc = new DOMParser().parseFromString(await res.text(), 'text/html');
      return { total: doc.querySelector('#cart-total').textContent };
    },
  },
  {
    kind: 'page',
    match: { url_patterns: ['http://shop.localhost/*'] },
    tool: {
      name: 'place_order',
      description: 'Check out: adds the items given (sku and quantity, if any) to the cart, then places the order for the cart for the name and postcode given.',
      inputSchema: {
        type: 'object',
        properties: {
          items: { type: 'array', items: { type: 'object', properties: { sku: { type: 'string' }, quantity: { type: 'integer' } } } },
          name: { type: 'string' },
          postcode: { type: 'string' },
        },
        required: ['name', 'postcode'],
      },
    },
    execute: async ({ items: add, name, postcode }) => {
      for (const { sku, quantity } of add || []) {
        const res = await fetch('/cart/add', { method: 'POST', body: new URLSearchParams({ sku, qty: String(quantity) }) });
        if (!res.ok) throw new Error(`could not add ${sku}`);
      }
      const form = new DOMParser().parseFromString(await (await fetch('/checkout')).text(), 'text/html');
      const items = form.querySelector('input[name=items]');
      if (!items) throw new Error('the cart is empty');
      try {
        const res = await fetch('/checkout', { method: 'POST', body: new URLSearchParams({ items: items.value, name, postcode }) });
        return { sent: true, status: res.status };
      } catch (e) {
        return { sent: true, status: null, note: 'the shop did not answer' };
      }
    },
  },
]
