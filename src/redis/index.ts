export { isCluster, scanKeys, unlinkKeys, type RedisClient } from './redis-client.js';
export {
  defineScript,
  scriptContracts,
  kindReply,
  codeReply,
  codedListReply,
  flagReply,
  valueReply,
  numberReply,
  stringListReply,
  asString,
  asNumber,
  asOptionalString,
  Script,
  type ScriptArg,
  type ScriptReply,
  type ScriptContract,
  type ScriptSpec,
  type FieldDecoder,
  type KindsOf,
} from './define-script.js';
export {
  watchRedisGeneration,
  currentGeneration,
  redisLostDataSince,
  type RedisGenerationWatch,
} from './redis-generation.js';
export { readEviction, evicts, isEvictionReason, EVICTION_TAG, type EvictionState } from './redis-eviction.js';
export {
  connectRedis,
  refuseEvictingRedis,
  refuseRedisCluster,
  redactRedisUrl,
  redisOptions,
  watchRedisLiveness,
  redisLiveness,
  DEFAULT_COMMAND_TIMEOUT_MS,
  BULLMQ_MAX_BLOCK_MS,
  type RedisRole,
  type ConnectRedisOptions,
  type RedisLiveness,
  type RedisLivenessOptions,
} from './redis-connection.js';
export { connectConfiguredRedis, describeRedisTarget } from './cluster-connection.js';
export { subscribeChannel, type ChannelSubscriberOptions } from './channel-subscriber.js';
export {
  rideOutRedis,
  isRedisUnavailable,
  isRedisFull,
  DEFAULT_PRODUCER_OUTAGE_MS,
  type RideOutOptions,
} from './ride-out-redis.js';
export { RedisFullGuard, type PausableWorker, type RedisFullGuardOptions } from './redis-full-guard.js';
export { coalesceWrites } from './write-coalescing.js';
