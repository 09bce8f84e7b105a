/*
 * The simulator module's light surface: what `sim`'s declaration and argument parsing read
 * without loading the simulator (fastify). Everything here is also in index.ts.
 */
export { parseRateLimit } from './rate-spec.js';
export type { SimRateLimit } from './sim-options.js';
