export {
  telemetrySettingsFromEnv,
  type TelemetrySettings,
  type TraceExporterKind,
  type OtlpProtocol,
} from './telemetry-settings.js';
export { startTelemetry, type StartTelemetryOptions, type Telemetry } from './start-telemetry.js';
export {
  addTracedBatches,
  annotateBatchSpan,
  batchAttributes,
  bullmqTelemetry,
  SPAN_ATTR,
  type TraceableJob,
} from './batch-spans.js';
