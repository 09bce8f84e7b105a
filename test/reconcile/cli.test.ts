import { reconcileCliSuite } from './cli-suite.js';

reconcileCliSuite('crm-sync reconcile / import --reconcile / verify / schedule (child processes)');
