export { isCluster, scanKeys, scanTargets, unlinkKeys, type RedisClient } from './redis-client.js';
