export { MetricsRecorder, readCounters, type MetricsRecorderOptions, type CounterSample } from './metrics-recorder.js';

export { METRIC } from './metric-names.js';
export { readSeries, SERIES_BUCKET_MS, SERIES_TTL_SECONDS, type SeriesPoint } from './metrics-series.js';
export {
  readRunSeries,
  addToRunSeries,
  RUN_SERIES_MAX_BUCKETS,
  RUN_SERIES_TTL_SECONDS,
  type RunIncrements,
} from './run-series.js';
