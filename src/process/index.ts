/** Public surface of the process module: supervised children, pidfiles, ports, the install-dir lock. */
export * from './args.js';
export * from './env.js';
export * from './errors.js';
export * from './lock.js';
export * from './log-file.js';
export * from './managed-process.js';
export * from './pidfile.js';
export * from './ports.js';
export * from './probes.js';
export { isPidRunning, isSameProcess, processStartTime } from './proc.js';
export * from './supervisor.js';
