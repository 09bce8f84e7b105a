export { SyncWorker, type SyncWorkerOptions } from './sync-worker.js';
export { AdaptiveConcurrency, type AdaptiveConcurrencyOptions } from './adaptive-concurrency.js';
export { startWorkerPool, type WorkerPool, type WorkerPoolOptions } from './worker-pool.js';
