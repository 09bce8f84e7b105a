import { DEFAULTS } from './defaults.js';

const DAY_MS = 86_400_000;

/** What derived settings follow: a config (its retention), a workspace, a process's close timeouts. */
export interface SettingsBasis {
  /** The config's retention. Default DEFAULTS.retention. */
  retention?: { days: number };
  /** The retention in ms, where a caller holds it so (wins over `retention`). */
  retentionMs?: number;
  /** The workspace's request timeout (ms). Default DEFAULTS.workspace.requestTimeoutMs. */
  requestTimeoutMs?: number;
  /**
   * Close timeouts (ms) of the parts a process closes one after the other on shutdown (a
   * worker pool, then a scheduler). Default none.
   */
  closeTimeoutsMs?: readonly number[];
}

/** Values that follow from settings, computed here only, so they follow a change of the setting. */
export interface DerivedSettings {
  /** The retention in ms. */
  retentionMs: number;
  /**
   * Life of a create marker, a deal claim and the write-order window: as long as a run can be
   * retried (the retention), plus the housekeeping's margin. A marker set by a retry on the last
   * day lives as long again.
   */
  createMarkerTtlMs: number;
  /**
   * How long a write on the wire holds its record (ms): the request timeout plus a margin for a
   * network that delivers late. A write whose answer never came counts as applied after it.
   */
  writeLeaseMs: number;
  /** BullMQ job retention of a workspace queue (its `removeOnComplete` and `removeOnFail`). */
  jobRetention: {
    removeOnComplete: { age: number; count: number };
    removeOnFail: { age: number; count: number };
  };
  /** A shutdown still running after this (ms) exits anyway: the parts' close timeouts plus a grace. */
  forceExitAfterMs: number;
}

/** The one place derived settings are computed. */
export function derivedSettings(basis: SettingsBasis = {}): DerivedSettings {
  const retentionMs = basis.retentionMs ?? (basis.retention ?? DEFAULTS.retention).days * DAY_MS;
  const requestTimeoutMs = basis.requestTimeoutMs ?? DEFAULTS.workspace.requestTimeoutMs;
  const { completedJobs, failedJobs } = DEFAULTS.queue;
  return {
    retentionMs,
    createMarkerTtlMs: retentionMs + DEFAULTS.retention.markerMarginMs,
    writeLeaseMs: requestTimeoutMs + DEFAULTS.worker.writeLeaseMarginMs,
    jobRetention: {
      removeOnComplete: { age: completedJobs.ageSeconds, count: completedJobs.count },
      removeOnFail: { age: failedJobs.ageSeconds, count: failedJobs.count },
    },
    forceExitAfterMs: (basis.closeTimeoutsMs ?? []).reduce((a, b) => a + b, 0) + DEFAULTS.cli.shutdownGraceMs,
  };
}
