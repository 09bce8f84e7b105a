export { isCluster, scanKeys, unlinkKeys, type RedisClient } from './redis-client.js';
export { LuaScript } from './lua-script.js';
