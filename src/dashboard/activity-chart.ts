import { readSeries, SERIES_BUCKET_MS, type SeriesPoint } from '../metrics/index.js';
import type { RunRecord } from '../runs/index.js';
import type { Runtime } from '../runtime/index.js';
import { html, type SafeHtml } from './html.js';

/*
 * Activity charts drawn on the server as SVG: no script and nothing loaded from elsewhere, so
 * they live under the pages' strict Content-Security-Policy. A page in progress reloads every few
 * seconds (dashboard.js), which is what makes the chart live.
 */

const WIDTH = 640;
const HEIGHT = 70;

interface Line {
  label: string;
  /** Value of a bucket, in the unit the label says. */
  value: (p: SeriesPoint) => number;
  unit: string;
  tone: 'run' | 'warn' | 'bad';
}

const LINES: Line[] = [
  { label: 'Requests', value: (p) => p.requests / (SERIES_BUCKET_MS / 1000), unit: '/s', tone: 'run' },
  { label: '429 answers', value: (p) => p.rateLimited, unit: ' per 10 s', tone: 'warn' },
  { label: 'Failed rows', value: (p) => p.failed, unit: ' per 10 s', tone: 'bad' },
];

function fmt(v: number): string {
  return v.toLocaleString('en-US', { maximumFractionDigits: 1 });
}

function sparkline(points: SeriesPoint[], line: Line): SafeHtml {
  const values = points.map(line.value);
  const max = Math.max(0, ...values);
  const total = values.reduce((a, b) => a + b, 0);
  const step = points.length > 1 ? WIDTH / (points.length - 1) : 0;
  const y = (v: number) => (max === 0 ? HEIGHT - 1 : HEIGHT - 1 - (v / max) * (HEIGHT - 4));
  const coords = values.map((v, i) => `${(i * step).toFixed(1)},${y(v).toFixed(1)}`).join(' ');
  const last = values[values.length - 1] ?? 0;
  return html`<figure class="spark ${line.tone}" data-series="${line.label}" data-max="${max}" data-total="${total}">
  <figcaption><b>${line.label}</b> <span class="muted">now ${fmt(last)}${line.unit} · peak ${fmt(max)}${line.unit}</span></figcaption>
  <svg viewBox="0 0 ${WIDTH} ${HEIGHT}" preserveAspectRatio="none" role="img" aria-label="${line.label}, peak ${fmt(max)}${line.unit}">
    <line x1="0" y1="${HEIGHT - 0.5}" x2="${WIDTH}" y2="${HEIGHT - 0.5}" class="axis"></line>
    ${points.length > 1 ? html`<polyline points="${coords}"></polyline>` : ''}
  </svg>
</figure>`;
}

/** The charts of one workspace's activity between two moments, or a line saying there is none yet. */
export function activityCharts(title: string, points: SeriesPoint[]): SafeHtml {
  const from = points[0]?.t;
  const to = points[points.length - 1]?.t;
  const span =
    from !== undefined && to !== undefined
      ? `${new Date(from).toISOString().slice(11, 19)}–${new Date(to + SERIES_BUCKET_MS).toISOString().slice(11, 19)} UTC`
      : '';
  if (points.length === 0)
    return html`<div class="card chart"><h2>${title}</h2><p class="muted">No activity recorded in the last two hours.</p></div>`;
  return html`<div class="card chart" data-chart>
  <h2>${title} <span class="muted small">${span}, 10-second steps</span></h2>
  <div class="sparks">${LINES.map((line) => sparkline(points, line))}</div>
</div>`;
}

/**
 * The run's chart: its workspace's requests, 429s and failures while the run went on (the fleet
 * counters are kept per workspace, not per run: other runs of the workspace at the same time are
 * in it too, which the title says). Only the last two hours are kept.
 */
export async function runChart(runtime: Runtime, run: RunRecord, now = Date.now()): Promise<SafeHtml> {
  const from = Date.parse(run.createdAt) - SERIES_BUCKET_MS;
  const end =
    run.status === 'running' || run.finishedAt === undefined ? now : Date.parse(run.finishedAt) + SERIES_BUCKET_MS;
  const points = await readSeries(runtime.redis, runtime.config.prefix, run.workspace, from, Math.min(end, now));
  return activityCharts(`Workspace ${run.workspace} during this run`, points);
}

/** A workspace's last `minutes` of activity. */
export async function workspaceChart(
  runtime: Runtime,
  workspace: string,
  minutes = 30,
  now = Date.now(),
): Promise<SafeHtml> {
  const points = await readSeries(runtime.redis, runtime.config.prefix, workspace, now - minutes * 60_000, now);
  return activityCharts(`Workspace ${workspace}, last ${minutes} minutes`, points);
}
