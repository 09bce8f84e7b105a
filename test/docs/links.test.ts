import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { brokenLinks, docFiles, headingAnchors } from './markdown.js';

/* README.md and docs/*.md link into each other by file and heading: a moved page or a renamed heading must not leave a link behind. */

const scratch = mkdtempSync(join(tmpdir(), 'crm-sync-links-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('links in README.md and docs/', () => {
  it('reads the README and at least the reference pages', () => {
    expect(docFiles()).toEqual(expect.arrayContaining(['README.md', 'docs/guarantees.md', 'docs/troubleshooting.md']));
  });

  it.each(docFiles())('%s: every relative link and #anchor leads to a file and heading', (file) => {
    expect(brokenLinks(file)).toEqual([]);
  });

  it('makes anchors as GitHub does', () => {
    const anchors = headingAnchors(
      '# Piping rows in: `import -`\n## How far Redis may be\n## Tracing (OpenTelemetry)\n## A\n## A\n```\n# not a heading\n```\n',
    );
    expect([...anchors]).toEqual([
      'piping-rows-in-import--',
      'how-far-redis-may-be',
      'tracing-opentelemetry',
      'a',
      'a-1',
    ]);
  });

  it('finds a missing file, a missing heading and a missing anchor in the same page', () => {
    mkdirSync(join(scratch, 'docs'));
    writeFileSync(join(scratch, 'docs', 'page.md'), '# Page\n\n## A section\n');
    writeFileSync(
      join(scratch, 'README.md'),
      [
        '# Readme',
        '[ok](docs/page.md) [ok](docs/page.md#a-section) [ok](#readme) [web](https://example.com/x#y)',
        '[gone](docs/gone.md)',
        '[no heading](docs/page.md#another-section)',
        '[no anchor here](#nowhere)',
        '`[in code](docs/nothing.md)`',
        '```',
        '[in a fence](docs/nothing.md)',
        '```',
        '![image](docs/missing.png)',
      ].join('\n'),
    );
    expect(brokenLinks('README.md', scratch)).toEqual([
      'README.md:3: docs/gone.md (no file docs/gone.md)',
      'README.md:4: docs/page.md#another-section (no heading #another-section in docs/page.md)',
      'README.md:5: #nowhere (no heading #nowhere in README.md)',
      'README.md:10: docs/missing.png (no file docs/missing.png)',
    ]);
  });
});
