/*
 * The CLI's light surface, for the bin entry (src/cli.ts): the program, the commands a given
 * argv needs, and exit codes. Each command loads its action (and the library) only when it runs.
 */
export { buildProgram } from './program.js';
export { registrationsFor } from './commands.js';
export { EXIT } from './exit-codes.js';
