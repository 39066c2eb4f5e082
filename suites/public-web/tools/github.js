// Treatment tools for GitHub (Kernel custom-tool form). They call GitHub's public REST API from
// the page, signed out (60 requests an hour per IP): api.github.com on github.com, /api/v3 on
// any other host (as GitHub Enterprise serves it, and the local replica). No tool covers
// releases: the placebo task (github-latest-release) must be solved without one.
[
  {
    kind: 'page',
    match: { url_patterns: ['https://github.com/*'] },
    tool: {
      name: 'get_pull_request',
      description: 'One pull request of a public repository: title, author, state, merged, merged_by, merged_at, merge commit.',
      inputSchema: {
        type: 'object',
        properties: { repository: { type: 'string', description: 'owner/name' }, number: { type: 'integer' } },
        required: ['repository', 'number'],
      },
    },
    execute: async ({ repository, number }) => {
      const api = location.hostname === 'github.com' ? 'https://api.github.com' : `${location.origin}/api/v3`;
      const res = await fetch(`${api}/repos/${repository}/pulls/${number}`, { headers: { Accept: 'application/vnd.github+json' } });
      if (!res.ok) throw new Error(`GitHub API ${res.status} for ${repository}#${number}`);
      const pr = await res.json();
      return { number: pr.number, title: pr.title, author: pr.user && pr.user.login, state: pr.state, merged: pr.merged,
               merged_by: pr.merged_by && pr.merged_by.login, merged_at: pr.merged_at, merge_commit_sha: pr.merge_commit_sha };
    },
  },
  {
    kind: 'page',
    match: { url_patterns: ['https://github.com/*'] },
    tool: {
      name: 'search_merged_pull_requests',
      description: 'Merged pull requests of a repository, most recently updated first (number, title, author); words in `query` must all be in the title.',
      inputSchema: {
        type: 'object',
        properties: {
          repository: { type: 'string', description: 'owner/name' },
          query: { type: 'string', description: 'words the title must contain' },
          limit: { type: 'integer', default: 10 },
        },
        required: ['repository'],
      },
    },
    execute: async ({ repository, query = '', limit = 10 }) => {
      const words = query.trim() ? ` ${query.trim()} in:title` : '';
      const q = encodeURIComponent(`repo:${repository} is:pr is:merged${words}`);
      const api = location.hostname === 'github.com' ? 'https://api.github.com' : `${location.origin}/api/v3`;
      const res = await fetch(`${api}/search/issues?q=${q}&sort=updated&order=desc&per_page=${limit}`);
      if (!res.ok) throw new Error(`GitHub search ${res.status}`);
      return (await res.json()).items.map((i) => ({ number: i.number, title: i.title, author: i.user.login }));
    },
  },
]
