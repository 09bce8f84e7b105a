// What `crm-sync refs` does, loaded by refs-command.ts only when the command runs.
import type { Command } from 'commander';
import { getWorkspace } from '../config/index.js';
import { LIST_RESOURCES } from '../crm/index.js';
import { ReferenceIndex, referenceStoreOf, workspaceReferences, type ReferencePass } from '../references/index.js';
import { openStore } from '../runtime/light.js';
import { cliContext } from './context.js';

/** `refs`'s options, as commander gives them (declared in refs-command.ts). */
export interface RefsOptions {
  workspace: string;
  json?: boolean;
  refresh?: boolean;
}

function age(ms: number): string {
  const s = Math.round(ms / 1000);
  return s < 120 ? `${s} s` : s < 7200 ? `${Math.round(s / 60)} min` : `${(s / 3600).toFixed(1)} h`;
}

export async function runRefs(opts: RefsOptions, command: Command): Promise<void> {
  const { config, logger } = cliContext(command);
  const ws = getWorkspace(config, opts.workspace);
  const { redis } = await openStore(config);
  try {
    const store = referenceStoreOf(config, opts.workspace, redis);
    let pages = 0;
    if (opts.refresh) {
      const read = await workspaceReferences({
        config,
        workspace: opts.workspace,
        redis,
        logger,
        lists: LIST_RESOURCES,
        refresh: true,
      });
      pages = read.pages;
    }
    // What the store holds, whatever its age (a run reads a stale pass again; this only shows it).
    const passes: ReferencePass[] = [];
    for (const list of LIST_RESOURCES) {
      const pass = await store.read(list);
      if (pass) passes.push(pass);
    }
    const index = new ReferenceIndex(passes);
    const now = Date.now();
    const pipelines = index.entries('pipeline').map((p) => ({
      id: p.id,
      name: p.name,
      stages: index
        .entries('stage')
        .filter((s) => s.pipelineId === p.id)
        .map((s) => ({ id: s.id, name: s.name })),
    }));
    const lists = passes.map((p) => ({
      list: p.list,
      readAt: new Date(p.readAtMs).toISOString(),
      stale: now - p.readAtMs > ws.referencesMaxAgeMs,
    }));
    const tags = index.entries('tag').map(({ id, name }) => ({ id, name }));
    const companies = index.entries('company').map(({ id, name }) => ({ id, name }));
    if (opts.json) {
      const bytes = await store.bytes(LIST_RESOURCES);
      process.stdout.write(
        `${JSON.stringify({ workspace: opts.workspace, lists, listRequests: pages, bytes, pipelines, tags, companies }, null, 2)}\n`,
      );
      return;
    }
    const out: string[] = [];
    if (passes.length === 0) {
      out.push(
        `no references stored for workspace ${opts.workspace} yet: a run with names in its mapping reads them, or run crm-sync refs -w ${opts.workspace} --refresh`,
      );
    } else {
      out.push(
        `references of workspace ${opts.workspace} (what its records show; the API lists no pipelines, tags or companies):`,
      );
      for (const l of passes)
        out.push(
          `  ${l.list}: read ${new Date(l.readAtMs).toISOString()} (${age(now - l.readAtMs)} ago${now - l.readAtMs > ws.referencesMaxAgeMs ? ', older than referencesMaxAgeMs: a run reads it again' : ''})`,
        );
      if (pages > 0) out.push(`  ${pages} list requests made now`);
      out.push(`pipelines (${pipelines.length}):`);
      for (const p of pipelines) {
        out.push(`  ${JSON.stringify(p.name)} ${p.id}`);
        for (const s of p.stages) out.push(`    stage ${JSON.stringify(s.name)} ${s.id}`);
      }
      out.push(`tags (${tags.length}):`);
      for (const t of tags) out.push(`  ${JSON.stringify(t.name)} ${t.id}`);
      out.push(`companies (${companies.length}):`);
      for (const c of companies) out.push(`  ${JSON.stringify(c.name)} ${c.id}`);
    }
    process.stdout.write(`${out.join('\n')}\n`);
  } finally {
    redis.disconnect();
  }
}
