// Treatment tools for Hacker News (Kernel custom-tool form): the official Firebase API.
[
  {
    kind: 'page',
    match: { url_patterns: ['https://news.ycombinator.com/*'] },
    tool: {
      name: 'get_item',
      description: 'A story or comment by id: title, by, time, url, score.',
      inputSchema: { type: 'object', properties: { id: { type: 'integer' } }, required: ['id'] },
    },
    execute: async ({ id }) => {
      const res = await fetch(`https://hacker-news.firebaseio.com/v0/item/${id}.json`);
      const item = await res.json();
      if (!item) throw new Error(`no item ${id}`);
      return { id: item.id, type: item.type, title: item.title, by: item.by, time: item.time, url: item.url, score: item.score };
    },
  },
  {
    kind: 'page',
    match: { url_patterns: ['https://news.ycombinator.com/*'] },
    tool: {
      name: 'get_top_stories',
      description: 'The current front page: the top stories in order, with title and id.',
      inputSchema: { type: 'object', properties: { limit: { type: 'integer', default: 30 } } },
    },
    execute: async ({ limit = 30 }) => {
      const ids = (await (await fetch('https://hacker-news.firebaseio.com/v0/topstories.json')).json()).slice(0, limit);
      const items = await Promise.all(ids.map((id) => fetch(`https://hacker-news.firebaseio.com/v0/item/${id}.json`).then((r) => r.json())));
      return items.map((i) => ({ id: i.id, title: i.title }));
    },
  },
]
