// Treatment tools for Wikipedium, in Kernel's custom-tool form.
[
  {
    kind: 'page',
    match: { url_patterns: ['http://wiki.localhost/*'] },
    tool: {
      name: 'get_infobox',
      description: 'Read the infobox facts of a Wikipedium article by its exact title.',
      inputSchema: { type: 'object', properties: { title: { type: 'string' } }, required: ['title'] },
    },
    execute: async ({ title }) => {
      const res = await fetch('/wiki/' + encodeURIComponent(title.replace(/ /g, '_')));
      if (!res.ok) throw new Error(`no article ${title}`);
      const doc = new DOMParser().parseFromString(await res.text(), 'text/html');
      const facts = {};
      for (const row of doc.querySelectorAll('.infobox tr')) facts[row.cells[0].textContent] = row.cells[1].textContent;
      return { title, facts };
    },
  },
  {
    kind: 'page',
    match: { url_patterns: ['http://wiki.localhost/*'] },
    tool: {
      name: 'create_account',
      description: 'Create a Wikipedium account in one step (the sign-up and its confirmation).',
      inputSchema: {
        type: 'object',
        properties: { username: { type: 'string' }, email: { type: 'string' }, newsletter: { type: 'boolean' } },
        required: ['username', 'email'],
      },
    },
    execute: async ({ username, email, newsletter = false }) => {
      const body = new URLSearchParams({ username, email, newsletter: newsletter ? 'yes' : 'no' });
      const res = await fetch('/signup/confirm', { method: 'POST', body }).catch(() => null);
      return { sent: true, status: res ? res.status : null };
    },
  },
]
