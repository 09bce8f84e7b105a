import { createRequire } from 'node:module';
import { context, propagation, trace } from '@opentelemetry/api';
import type { SpanExporter } from '@opentelemetry/sdk-trace-node';
import type { BullMQOtel } from 'bullmq-otel';
import { telemetrySettingsFromEnv, type TelemetrySettings } from './telemetry-settings.js';

export interface StartTelemetryOptions {
  /** Where spans go. Default: the exporter the OTEL_* variables name; none of them set means tracing stays off. */
  exporter?: SpanExporter;
  /** Export every span as it ends instead of in batches (OTEL_BSP_*). Default false; tests set it. */
  immediate?: boolean;
  /** Environment to read OTEL_* from. Default `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** `service.name` when OTEL_SERVICE_NAME is unset. Default `crm-sync`. */
  serviceName?: string;
}

export interface Telemetry {
  /** False when the environment did not ask for tracing: nothing was loaded or patched. */
  readonly enabled: boolean;
  /** Sends the spans still buffered and undoes the instrumentation. */
  shutdown(): Promise<void>;
}

interface Active {
  bullmq: BullMQOtel;
  stop(): Promise<void>;
}

let active: Active | undefined;

/** The running telemetry's BullMQ adapter, when tracing is on (queues and workers pass it to BullMQ). */
export function activeBullmqTelemetry(): BullMQOtel | undefined {
  return active?.bullmq;
}

const OFF: Telemetry = { enabled: false, shutdown: async () => undefined };

/**
 * Starts tracing for this process: a tracer provider with the W3C trace-context propagator,
 * the HTTP client and ioredis instrumentations, and the BullMQ adapter that carries a batch's
 * context from the producer into the worker's job. Idempotent; off unless asked for (see
 * telemetrySettingsFromEnv), and then nothing of the SDK is even loaded.
 */
export async function startTelemetry(options: StartTelemetryOptions = {}): Promise<Telemetry> {
  const env = options.env ?? process.env;
  const settings = options.exporter ? undefined : telemetrySettingsFromEnv(env);
  if (settings && !settings.enabled) return OFF;
  if (active) return { enabled: true, shutdown: stopActive };

  const [
    { NodeTracerProvider, BatchSpanProcessor, SimpleSpanProcessor },
    resources,
    { registerInstrumentations },
    { HttpInstrumentation },
    { IORedisInstrumentation },
    { BullMQOtel },
  ] = await Promise.all([
    import('@opentelemetry/sdk-trace-node'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/instrumentation'),
    import('@opentelemetry/instrumentation-http'),
    import('@opentelemetry/instrumentation-ioredis'),
    import('bullmq-otel'),
  ]);
  const exporter = options.exporter ?? (await exporterFor(settings as TelemetrySettings));
  const resource = resources
    .resourceFromAttributes({ 'service.name': options.serviceName ?? 'crm-sync' })
    .merge(resources.detectResources({ detectors: [resources.envDetector] }));
  const processor = options.immediate ? new SimpleSpanProcessor(exporter) : new BatchSpanProcessor(exporter);
  const provider = new NodeTracerProvider({ resource, spanProcessors: [processor] });
  provider.register();
  const unregister = registerInstrumentations({
    tracerProvider: provider,
    instrumentations: [new HttpInstrumentation(), new IORedisInstrumentation()],
  });
  // The instrumentations patch modules as they are required. crm-sync and its dependencies
  // import them as ES modules, which require hooks do not see: requiring them once here patches
  // the shared module objects (http.request, ioredis's prototype) whatever imported them first.
  const require = createRequire(import.meta.url);
  for (const name of ['http', 'https', 'ioredis']) require(name);

  active = {
    bullmq: new BullMQOtel(),
    async stop() {
      unregister();
      await provider.shutdown();
      trace.disable();
      context.disable();
      propagation.disable();
    },
  };
  return { enabled: true, shutdown: stopActive };
}

async function stopActive(): Promise<void> {
  const current = active;
  active = undefined;
  await current?.stop();
}

async function exporterFor(settings: TelemetrySettings): Promise<SpanExporter> {
  if (settings.exporter === 'console') {
    const { ConsoleSpanExporter } = await import('@opentelemetry/sdk-trace-node');
    return new ConsoleSpanExporter();
  }
  if (settings.protocol === 'http/json') {
    const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-http');
    return new OTLPTraceExporter();
  }
  const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-proto');
  return new OTLPTraceExporter();
}
