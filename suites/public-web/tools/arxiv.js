// Treatment tools for arXiv (Kernel custom-tool form): the abstract page's citation metadata.
[
  {
    kind: 'page',
    match: { url_patterns: ['https://arxiv.org/*'] },
    tool: {
      name: 'get_paper',
      description: 'A paper by its arXiv id: title, authors in order, first submission date.',
      inputSchema: { type: 'object', properties: { id: { type: 'string', description: 'e.g. 2101.00001' } }, required: ['id'] },
    },
    execute: async ({ id }) => {
      const res = await fetch(`/abs/${encodeURIComponent(id)}`);
      if (!res.ok) throw new Error(`no paper ${id}`);
      const doc = new DOMParser().parseFromString(await res.text(), 'text/html');
      const meta = (name) => [...doc.querySelectorAll(`meta[name="${name}"]`)].map((m) => m.content);
      return { id, title: meta('citation_title')[0], authors: meta('citation_author'), date: meta('citation_date')[0] };
    },
  },
]
