// Treatment tools for Demoblaze (Kernel custom-tool form): the shop's own JSON API
// (api.demoblaze.com), which its pages call too. The cart is kept per browser cookie.
[
  {
    kind: 'page',
    match: { url_patterns: ['https://www.demoblaze.com/*'] },
    tool: {
      name: 'list_products',
      description: 'Every product with its id, title, price and category.',
      inputSchema: { type: 'object', properties: {} },
    },
    execute: async () => {
      const res = await fetch('https://api.demoblaze.com/entries');
      const data = await res.json();
      return data.Items.map((p) => ({ id: p.id, title: p.title, price: p.price, category: p.cat }));
    },
  },
  {
    kind: 'page',
    match: { url_patterns: ['https://www.demoblaze.com/prod.html*'] },
    tool: {
      name: 'add_current_product_to_cart',
      description: 'Adds the product shown on this product page to the cart, as its Add to cart button does.',
      inputSchema: { type: 'object', properties: {} },
    },
    execute: async () => {
      const button = [...document.querySelectorAll('a')].find((a) => a.textContent.trim() === 'Add to cart');
      if (!button) throw new Error('not a product page');
      button.click();
      return { clicked: true };
    },
  },
]
