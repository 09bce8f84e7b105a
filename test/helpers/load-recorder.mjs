// `node --import ./test/helpers/load-recorder.mjs …`: appends the URL of every module the process
// loads (ES modules and what they require) to the file named by CRM_SYNC_LOAD_LOG, one a line.
// Tests use it to check that a command's help does not load the heavy dependencies.
import { register } from 'node:module';

if (process.env.CRM_SYNC_LOAD_LOG) register('./load-recorder-hooks.mjs', import.meta.url);
