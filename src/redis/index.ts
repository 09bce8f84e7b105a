export { isCluster, scanKeys, unlinkKeys, type RedisClient } from './redis-client.js';
