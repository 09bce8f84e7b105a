export { Secret } from './secret.js';
export { DEFAULTS, resolveSettings, type Defaults, type Resolved } from './defaults.js';
export { derivedSettings, type DerivedSettings, type SettingsBasis } from './derived-settings.js';
export {
  loadConfig,
  configFromObject,
  getWorkspace,
  readApiKey,
  readSecret,
  DEFAULT_CONFIG_FILE,
  DEFAULT_REDIS_URL,
  DEFAULT_PREFIX,
  type Config,
  type RedisClusterConfig,
  type WorkspaceConfig,
  type ApiKeySource,
  type LoadConfigOptions,
} from './load-config.js';
export {
  ConfigFileSchema,
  DEFAULT_ROWS_PER_JOB,
  RateLimitSchema,
  WORKSPACE_NAME,
  type RateLimit,
  type ConfigFile,
} from './config-schema.js';
export { configJsonSchema, CONFIG_JSON_SCHEMA_PATH } from './json-schema.js';
export { checkTokenStrength, weakTokenReason, MIN_TOKEN_LENGTH, MAKE_TOKEN_HINT } from './token-strength.js';
