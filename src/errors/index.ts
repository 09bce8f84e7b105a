export { ERRORS, ERROR_CODES, USER_ERROR_CODES, errorEntry, type ErrorCode, type ErrorEntry } from './error-codes.js';
export { EXIT, type ExitCode } from './exit-codes.js';
export { CrmSyncError, isCrmSyncError, errorMessage } from './crm-sync-error.js';
