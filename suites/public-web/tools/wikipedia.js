// Treatment tools for Wikipedia (Kernel custom-tool form): the site's own REST and Action APIs.
[
  {
    kind: 'page',
    match: { url_patterns: ['https://en.wikipedia.org/*'] },
    tool: {
      name: 'get_article_summary',
      description: "An article's lead summary (title, description, extract) by its title.",
      inputSchema: { type: 'object', properties: { title: { type: 'string' } }, required: ['title'] },
    },
    execute: async ({ title }) => {
      const res = await fetch(`/api/rest_v1/page/summary/${encodeURIComponent(title.replace(/ /g, '_'))}`);
      if (!res.ok) throw new Error(`no article ${title}`);
      const s = await res.json();
      return { title: s.title, description: s.description, extract: s.extract };
    },
  },
  {
    kind: 'page',
    match: { url_patterns: ['https://en.wikipedia.org/*'] },
    tool: {
      name: 'get_infobox',
      description: "The rows of an article's infobox as label/value pairs.",
      inputSchema: { type: 'object', properties: { title: { type: 'string' } }, required: ['title'] },
    },
    execute: async ({ title }) => {
      const res = await fetch(`/w/api.php?action=parse&format=json&prop=text&origin=*&page=${encodeURIComponent(title)}`);
      const data = await res.json();
      if (!data.parse) throw new Error(`no article ${title}`);
      const doc = new DOMParser().parseFromString(data.parse.text['*'], 'text/html');
      const rows = [];
      for (const tr of doc.querySelectorAll('.infobox tr')) {
        const th = tr.querySelector('th'), td = tr.querySelector('td');
        if (th && td) rows.push({ label: th.textContent.trim(), value: td.textContent.trim() });
      }
      return { title: data.parse.title, rows };
    },
  },
]
