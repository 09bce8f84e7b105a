/*
 * The config module's light surface: what a command's declaration (`--help`, option defaults)
 * reads without loading zod and the config schema. Everything here is also in index.ts.
 */
export { DEFAULTS, type Defaults } from './defaults.js';
