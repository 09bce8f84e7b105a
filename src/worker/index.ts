export { SyncWorker, type SyncWorkerOptions } from './sync-worker.js';
export { startWorkerPool, type WorkerPool, type WorkerPoolOptions } from './worker-pool.js';
