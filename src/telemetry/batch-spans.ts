import { context, SpanKind, SpanStatusCode, trace, type Attributes } from '@opentelemetry/api';
import type { JobsOptions, Telemetry as BullmqTelemetry } from 'bullmq';
import { activeBullmqTelemetry } from './start-telemetry.js';

/** Span attribute names crm-sync sets (its own namespace, next to BullMQ's and the HTTP ones). */
export const SPAN_ATTR = {
  runId: 'crm_sync.run_id',
  workspace: 'crm_sync.workspace',
  operation: 'crm_sync.operation',
  firstRow: 'crm_sync.rows.first',
  lastRow: 'crm_sync.rows.last',
  rowCount: 'crm_sync.rows.count',
} as const;

/** What a queued job looks like to tracing: a run's batch of numbered rows. */
export interface TraceableJob {
  name: string;
  data: { runId: string; rows: ReadonlyArray<{ row: number }> };
  opts?: JobsOptions;
}

/** Options to spread into a BullMQ Queue or Worker: its `telemetry` when tracing is on, else nothing. */
export function bullmqTelemetry(): { telemetry?: BullmqTelemetry } {
  const telemetry = activeBullmqTelemetry();
  return telemetry ? { telemetry } : {};
}

/** The run id, workspace, operation and row range of a batch, as span attributes. */
export function batchAttributes(workspace: string, job: Pick<TraceableJob, 'name' | 'data'>): Attributes {
  const rows = job.data.rows.map((r) => r.row);
  return {
    [SPAN_ATTR.runId]: job.data.runId,
    [SPAN_ATTR.workspace]: workspace,
    [SPAN_ATTR.operation]: job.name,
    [SPAN_ATTR.rowCount]: rows.length,
    ...(rows.length > 0 ? { [SPAN_ATTR.firstRow]: Math.min(...rows), [SPAN_ATTR.lastRow]: Math.max(...rows) } : {}),
  };
}

/**
 * Queues `jobs` through `add` (the producer's addBulk) with one new trace per job: a row batch
 * is the unit an operator follows, from here through BullMQ into the worker's CRM call. Each
 * job carries its batch span's context in BullMQ's telemetry metadata, so the worker's
 * `process` span and everything under it (HTTP, Redis) join that trace. Without tracing, `add`
 * gets the jobs unchanged.
 */
export async function addTracedBatches<J extends TraceableJob, R>(
  workspace: string,
  jobs: J[],
  add: (jobs: J[]) => Promise<R>,
): Promise<R> {
  const telemetry = activeBullmqTelemetry();
  if (!telemetry) return add(jobs);
  const tracer = trace.getTracer('crm-sync');
  const spans = jobs.map((job) =>
    tracer.startSpan(`queue ${job.name}`, {
      kind: SpanKind.PRODUCER,
      root: true,
      attributes: batchAttributes(workspace, job),
    }),
  );
  const traced = jobs.map((job, i) => {
    const span = spans[i];
    if (!span) return job;
    const metadata = telemetry.contextManager.getMetadata(trace.setSpan(context.active(), span));
    // Same job with one more option: still a J.
    return { ...job, opts: { ...job.opts, telemetry: { metadata } } } as J;
  });
  try {
    return await add(traced);
  } catch (err) {
    for (const span of spans) {
      span.recordException(err instanceof Error ? err : String(err));
      span.setStatus({ code: SpanStatusCode.ERROR });
    }
    throw err;
  } finally {
    for (const span of spans) span.end();
  }
}

/** Puts a batch's attributes on the span BullMQ opened for processing it (the worker's `process` span). */
export function annotateBatchSpan(workspace: string, job: Pick<TraceableJob, 'name' | 'data'>): void {
  trace.getActiveSpan()?.setAttributes(batchAttributes(workspace, job));
}
