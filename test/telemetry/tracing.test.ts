import { SpanKind, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { traceLogFields } from '../../src/log/index.js';
import { SPAN_ATTR, startTelemetry, type Telemetry } from '../../src/telemetry/index.js';
import { csv, startHarness, type Harness } from '../helpers/pipeline.js';

// One process-wide tracer provider: started once for this file, before any queue or worker.
const exporter = new InMemorySpanExporter();
let telemetry: Telemetry;
let h: Harness;

beforeAll(async () => {
  telemetry = await startTelemetry({ exporter, immediate: true });
  h = await startHarness({ records: 20 });
});
afterAll(async () => {
  await h?.close();
  await telemetry?.shutdown();
});

const parentOf = (s: ReadableSpan) => s.parentSpanContext?.spanId;
const scopeOf = (s: ReadableSpan) => s.instrumentationScope.name;

describe('tracing (in-memory exporter, real Redis, the simulator over HTTP)', () => {
  it('one trace per row batch: producer → BullMQ → worker → CRM HTTP call and Redis', async () => {
    await h.startWorkers({ concurrency: 2 });
    const deals = [...h.ws.deals.values()].slice(0, 12);
    const run = await h.importFile(
      h.file(
        'deals.csv',
        csv(
          ['id', 'name'],
          deals.map((d, i) => [d.id, `Traced ${i}`]),
        ),
      ),
      'deal.update',
    );
    expect((await h.waitForRun(run.id)).counts).toMatchObject({ total: 12, succeeded: 12 });
    expect(h.config.workspaces.acme?.rowsPerJob).toBe(10);

    // The worker's span ends after the result is stored; give it a moment to be exported.
    const spans = async () => exporter.getFinishedSpans();
    let batches: ReadableSpan[] = [];
    for (let i = 0; i < 100; i++) {
      const all = await spans();
      batches = all.filter(
        (s) => s.kind === SpanKind.PRODUCER && s.attributes[SPAN_ATTR.runId] === run.id && !parentOf(s),
      );
      const processes = all.filter((s) => s.kind === SpanKind.CONSUMER && s.attributes[SPAN_ATTR.runId] === run.id);
      if (processes.length >= 2) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const all = await spans();

    // Two batches (rows 1-10 and 11-12), each the root of its own trace.
    expect(batches.map((b) => [b.attributes[SPAN_ATTR.firstRow], b.attributes[SPAN_ATTR.lastRow]]).sort()).toEqual([
      [1, 10],
      [11, 12],
    ]);
    expect(new Set(batches.map((b) => b.spanContext().traceId)).size).toBe(2);
    for (const batch of batches) {
      expect(batch.attributes).toMatchObject({ [SPAN_ATTR.workspace]: 'acme', [SPAN_ATTR.operation]: 'deal.update' });
      const traceId = batch.spanContext().traceId;
      const inTrace = all.filter((s) => s.spanContext().traceId === traceId);

      // BullMQ's `process` span continues the producer's batch span…
      const processing = inTrace.filter((s) => s.kind === SpanKind.CONSUMER);
      expect(processing).toHaveLength(1);
      const proc = processing[0]!;
      expect(parentOf(proc)).toBe(batch.spanContext().spanId);
      expect(proc.attributes).toMatchObject({
        [SPAN_ATTR.runId]: run.id,
        [SPAN_ATTR.firstRow]: batch.attributes[SPAN_ATTR.firstRow],
        [SPAN_ATTR.lastRow]: batch.attributes[SPAN_ATTR.lastRow],
      });

      // …and under it, one CRM call per row (HTTP client instrumentation) and Redis commands.
      const underProcess = (s: ReadableSpan): boolean => {
        for (let p = parentOf(s); p;) {
          if (p === proc.spanContext().spanId) return true;
          p = inTrace.find((x) => x.spanContext().spanId === p)?.parentSpanContext?.spanId;
        }
        return false;
      };
      const calls = inTrace.filter((s) => s.kind === SpanKind.CLIENT && scopeOf(s).includes('instrumentation-http'));
      const rows = Number(batch.attributes[SPAN_ATTR.rowCount]);
      expect(
        calls.filter((c) => c.attributes['http.request.method'] === 'PATCH' || c.attributes['http.method'] === 'PATCH'),
      ).toHaveLength(rows);
      expect(calls.every(underProcess)).toBe(true);
      const redis = inTrace.filter((s) => scopeOf(s).includes('ioredis'));
      expect(redis.length).toBeGreaterThan(0);
      expect(redis.filter(underProcess).length).toBeGreaterThan(0);
    }

    // Spans never carry the API key (it travels in a header the HTTP instrumentation does not record).
    expect(JSON.stringify(all.map((s) => [s.name, s.attributes, s.events]))).not.toContain(h.apiKey);
  });

  it('log lines written inside a span carry its trace and span ids; outside, none', () => {
    expect(traceLogFields()).toEqual({});
    trace.getTracer('test').startActiveSpan('log-fields', (span) => {
      const ctx = span.spanContext();
      expect(traceLogFields()).toEqual({ trace_id: ctx.traceId, span_id: ctx.spanId, trace_flags: '01' });
      span.end();
    });
  });
});
