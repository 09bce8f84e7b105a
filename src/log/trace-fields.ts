import { isSpanContextValid, trace } from '@opentelemetry/api';

/**
 * pino `mixin`: the active span's ids on every log line written inside it, so a log search
 * and a trace search meet. Field names follow the OpenTelemetry log data model. Without
 * tracing there is never an active span and this adds nothing.
 */
export function traceLogFields(): Record<string, string> {
  const span = trace.getActiveSpan();
  if (!span) return {};
  const ctx = span.spanContext();
  if (!isSpanContextValid(ctx)) return {};
  return { trace_id: ctx.traceId, span_id: ctx.spanId, trace_flags: `0${ctx.traceFlags.toString(16)}`.slice(-2) };
}
