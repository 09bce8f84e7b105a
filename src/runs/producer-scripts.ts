import { LuaScript } from './lua-script.js';
import { PRELUDE } from './run-scripts.js';

/**
 * ARGV[1] who produces the run (`host/pid/start`), or `exited@<ISO>` once that process has
 * stopped. Stored in the run's hash (so it goes with the run), only for a run that exists.
 */
export const SET_PRODUCER = new LuaScript(`${PRELUDE}
redis.call('HSET', run, 'producer', ARGV[1])
return 1
`);
