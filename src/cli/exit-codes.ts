// The exit codes live with the error registry (each code's entry names its exit code); the CLI
// reads them from there.
export { EXIT, type ExitCode } from '../errors/index.js';
