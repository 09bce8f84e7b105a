import {
  readRunSeries,
  readSeries,
  RUN_SERIES_MAX_BUCKETS,
  RUN_SERIES_TTL_SECONDS,
  SERIES_BUCKET_MS,
  type SeriesPoint,
} from '../metrics/index.js';
import type { RunRecord } from '../runs/index.js';
import type { Runtime } from '../runtime/index.js';
import { html, jsonBlock, type SafeHtml } from './html.js';

/*
 * Activity charts, drawn in the browser by uPlot: the page carries each chart's series as a JSON
 * data block, and dashboard.js draws every line of it with uPlot, which the dashboard serves
 * itself (/static/uplot.min.js), so the pages keep their strict Content-Security-Policy
 * (docs/architecture.md, "Activity series"). The captions (now, peak) are text on the server, so
 * the page says the numbers without script. A page in progress reloads every few seconds
 * (dashboard.js), which is what makes the chart live. A run's page has two: the run's own series,
 * and its workspace's while it went.
 */

interface Line {
  label: string;
  /** Value of a bucket, in the unit the caption says (once, after the peak: captions stay on one line). */
  value: (p: SeriesPoint) => number;
  unit: string;
  tone: 'run' | 'ok' | 'warn' | 'bad';
}

const LINES: Line[] = [
  { label: 'Requests', value: (p) => p.requests / (SERIES_BUCKET_MS / 1000), unit: '/s', tone: 'run' },
  // Rows the workers finished (succeeded or failed); invalid rows never reach them.
  { label: 'Rows done', value: (p) => p.succeeded + p.failed, unit: ' per 10 s', tone: 'ok' },
  { label: '429 answers', value: (p) => p.rateLimited, unit: ' per 10 s', tone: 'warn' },
  { label: 'Failed rows', value: (p) => p.failed, unit: ' per 10 s', tone: 'bad' },
];

/**
 * What dashboard.js draws: bucket starts in Unix seconds (uPlot's time axis), and each line's
 * values by its label (a figure's data-series).
 */
export interface ChartData {
  bucketSeconds: number;
  t: number[];
  lines: Record<string, number[]>;
}

export function chartData(points: SeriesPoint[]): ChartData {
  return {
    bucketSeconds: SERIES_BUCKET_MS / 1000,
    t: points.map((p) => p.t / 1000),
    lines: Object.fromEntries(LINES.map((line) => [line.label, points.map(line.value)])),
  };
}

function fmt(v: number): string {
  return v.toLocaleString('en-US', { maximumFractionDigits: 1 });
}

/** A line's caption, and the box dashboard.js draws it in; `last` is the newest of `points`. */
function figure(points: SeriesPoint[], last: SeriesPoint, line: Line): SafeHtml {
  const max = Math.max(0, ...points.map(line.value));
  return html`<figure class="spark ${line.tone}" data-series="${line.label}">
  <figcaption><b>${line.label}</b> <span class="muted">now ${fmt(line.value(last))} · peak ${fmt(max)}${line.unit}</span></figcaption>
  <div class="plot" role="img" aria-label="${line.label}, peak ${fmt(max)}${line.unit}"></div>
</figure>`;
}

export interface ChartText {
  /** Whose activity: `run` (the run's own series) or `workspace`. */
  kind: 'run' | 'workspace';
  /** What to say when there are no points. */
  empty: string;
  /** A line under the title (what the chart counts, what is not kept). */
  note?: string;
}

/** The charts of a series between two moments, or a line saying there is none. */
export function activityCharts(title: string, points: SeriesPoint[], text: ChartText): SafeHtml {
  const first = points[0];
  const last = points.at(-1);
  if (first === undefined || last === undefined)
    return html`<div class="card chart" data-chart="${text.kind}"><h2>${title}</h2><p class="muted">${text.empty}</p></div>`;
  const span = `${new Date(first.t).toISOString().slice(11, 19)}–${new Date(last.t + SERIES_BUCKET_MS).toISOString().slice(11, 19)} UTC`;
  return html`<div class="card chart" data-chart="${text.kind}">
  <h2>${title} <span class="muted small">${span}, 10-second steps</span></h2>
  ${text.note !== undefined ? html`<p class="muted small">${text.note}</p>` : ''}
  <div class="sparks">${LINES.map((line) => figure(points, last, line))}</div>
  ${jsonBlock(html`data-chart-data`, chartData(points))}
</div>`;
}

/**
 * The run's own chart: requests, rows done, 429s and failures of its rows, from the series the
 * workers keep per run (metrics/run-series.ts). While a pass goes it runs up to now, so a pause
 * shows as zeros; the series keeps the run's last two hours, for three days after its last request.
 */
export async function runChart(runtime: Runtime, run: RunRecord, now = Date.now()): Promise<SafeHtml> {
  const ongoing = run.finishedAt === undefined;
  const points = await readRunSeries(runtime.redis, runtime.config.prefix, run.id, ongoing ? now : undefined);
  const kept = Math.round(RUN_SERIES_TTL_SECONDS / 86_400);
  const cut =
    points.length >= RUN_SERIES_MAX_BUCKETS && points[0]!.t > Date.parse(run.createdAt)
      ? ' Only its last two hours are kept.'
      : '';
  return activityCharts('This run', points, {
    kind: 'run',
    empty: ongoing
      ? 'No request counted for this run yet.'
      : `No request was counted for this run: nothing was sent${run.options.dryRun === true ? ' (a dry run)' : ''}, or its series expired (kept ${kept} days after its last request).`,
    note: `Requests, results and 429 answers of this run's rows alone, as the workers counted them.${cut}`,
  });
}

/**
 * The run's workspace while the run went on: everything its workers did then, other runs of the
 * workspace included (next to the run's own chart, it shows what the run shared the CRM's rate
 * with). Only the last two hours are kept.
 */
export async function runWorkspaceChart(runtime: Runtime, run: RunRecord, now = Date.now()): Promise<SafeHtml> {
  const from = Date.parse(run.createdAt) - SERIES_BUCKET_MS;
  const end =
    run.status === 'running' || run.finishedAt === undefined ? now : Date.parse(run.finishedAt) + SERIES_BUCKET_MS;
  const points = await readSeries(runtime.redis, runtime.config.prefix, run.workspace, from, Math.min(end, now));
  return activityCharts(`Workspace ${run.workspace} during this run`, points, {
    kind: 'workspace',
    empty: 'No activity of the workspace recorded during this run in the last two hours.',
    note: 'All runs of the workspace together.',
  });
}

/** A workspace's last `minutes` of activity. */
export async function workspaceChart(
  runtime: Runtime,
  workspace: string,
  minutes = 30,
  now = Date.now(),
): Promise<SafeHtml> {
  const points = await readSeries(runtime.redis, runtime.config.prefix, workspace, now - minutes * 60_000, now);
  return activityCharts(`Workspace ${workspace}, last ${minutes} minutes`, points, {
    kind: 'workspace',
    empty: 'No activity recorded in the last two hours.',
  });
}
