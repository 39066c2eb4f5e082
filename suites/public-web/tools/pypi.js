// Treatment tools for PyPI (Kernel custom-tool form): PyPI's JSON API, same origin.
[
  {
    kind: 'page',
    match: { url_patterns: ['https://pypi.org/*'] },
    tool: {
      name: 'get_release_history',
      description: 'Every released version of a package with its first upload time, oldest first.',
      inputSchema: { type: 'object', properties: { package: { type: 'string' } }, required: ['package'] },
    },
    execute: async ({ package: name }) => {
      const res = await fetch(`/pypi/${encodeURIComponent(name)}/json`);
      if (!res.ok) throw new Error(`no package ${name}`);
      const data = await res.json();
      return Object.entries(data.releases)
        .map(([version, files]) => ({ version, uploaded: files.length ? files.map((f) => f.upload_time_iso_8601).sort()[0] : null }))
        .filter((r) => r.uploaded)
        .sort((a, b) => a.uploaded.localeCompare(b.uploaded));
    },
  },
]
