export {
  MetricsRecorder,
  readCounters,
  metricsKey,
  type MetricsRecorderOptions,
  type CounterSample,
} from './metrics-recorder.js';

export { METRIC } from './metric-names.js';
export { readSeries, seriesKey, SERIES_BUCKET_MS, SERIES_TTL_SECONDS, type SeriesPoint } from './metrics-series.js';
export {
  readRunSeries,
  runSeriesKey,
  addToRunSeries,
  RUN_SERIES_MAX_BUCKETS,
  RUN_SERIES_TTL_SECONDS,
  type RunIncrements,
} from './run-series.js';
