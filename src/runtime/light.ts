/*
 * The runtime's light surface: the run store on a checked Redis connection, for commands that
 * only read runs (`runs list`) and must not load the queues (BullMQ) index.ts opens. Everything
 * here is also in index.ts.
 */
export { openStore, type OpenStore } from './open-store.js';
