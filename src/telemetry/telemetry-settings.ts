import { CrmSyncError } from '../errors/index.js';

/** Where finished spans go. `otlp` speaks OTLP over HTTP; `console` prints them (for a look). */
export type TraceExporterKind = 'otlp' | 'console';

/** OTLP over HTTP: protobuf (the OpenTelemetry default) or JSON. gRPC is not shipped. */
export type OtlpProtocol = 'http/protobuf' | 'http/json';

export interface TelemetrySettings {
  enabled: boolean;
  exporter: TraceExporterKind;
  protocol: OtlpProtocol;
}

const OFF: TelemetrySettings = { enabled: false, exporter: 'otlp', protocol: 'http/protobuf' };

/**
 * Tracing is off unless the standard OpenTelemetry variables ask for it: an OTLP endpoint
 * (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or OTEL_TRACES_EXPORTER.
 * OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none win. Off by default because an
 * exporter with nowhere to send would retry and warn in every process, containers included.
 * The exporter itself reads the rest (headers, timeouts, OTEL_BSP_*, OTEL_TRACES_SAMPLER).
 */
export function telemetrySettingsFromEnv(env: NodeJS.ProcessEnv = process.env): TelemetrySettings {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return OFF;
  const named = env.OTEL_TRACES_EXPORTER?.trim().toLowerCase();
  const endpoint = Boolean(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim());
  if (named === 'none' || (!named && !endpoint)) return OFF;
  const exporter = named ?? 'otlp';
  if (exporter !== 'otlp' && exporter !== 'console') {
    throw new CrmSyncError(
      'CONFIG_INVALID',
      `OTEL_TRACES_EXPORTER=${exporter} is not supported: use otlp, console or none`,
    );
  }
  const protocol = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/protobuf')
    .trim()
    .toLowerCase();
  if (protocol !== 'http/protobuf' && protocol !== 'http/json') {
    throw new CrmSyncError(
      'CONFIG_INVALID',
      `OTEL_EXPORTER_OTLP_PROTOCOL=${protocol} is not supported: use http/protobuf or http/json`,
    );
  }
  return { enabled: true, exporter, protocol };
}
