export { buildDashboard, type DashboardOptions } from './build-dashboard.js';
export { createMetricsRegistry, type DashboardMetricsOptions } from './metrics-registry.js';
export { SESSION_COOKIE } from './auth-hooks.js';
export { checkTokenStrength, MIN_TOKEN_LENGTH } from './session-auth.js';
