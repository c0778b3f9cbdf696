import { Option } from 'commander';

/**
 * Options shared by many commands. Every flag has an environment-variable twin,
 * `PROVISIONER_<FLAG>` (commander reads it when the flag is absent); the default
 * is written here, where the option is declared.
 */

/** `--dir`: the install directory. Default: the current directory. */
export function dirOption(): Option {
  return new Option('--dir <path>', 'install directory holding install-config.yaml, manifests and state')
    .env('PROVISIONER_DIR')
    .default('.', 'the current directory');
}

/** `--output`: `text` (default) or `json` (one JSON event per line on stdout). */
export function outputOption(): Option {
  return new Option('--output <format>', 'output format')
    .choices(['text', 'json'])
    .env('PROVISIONER_OUTPUT')
    .default('text');
}

/** `--log-level`: the lowest level shown on the terminal. Default: `info`. The debug log file always gets everything. */
export function logLevelOption(): Option {
  return new Option('--log-level <level>', 'lowest log level shown')
    .choices(['debug', 'info', 'warn', 'error'])
    .env('PROVISIONER_LOG_LEVEL')
    .default('info');
}
