export { ERROR_CODES, USER_ERROR_CODES, type ErrorCode } from './error-codes.js';
export { CrmSyncError, isCrmSyncError, errorMessage } from './crm-sync-error.js';
