export { SyncWorker } from './sync-worker.js';
export type { SyncWorkerOptions } from './sync-worker-options.js';
export { startWorkerPool, type WorkerPool, type WorkerPoolOptions } from './worker-pool.js';
export { evictedReason } from './eviction-watch.js';
