import { InvalidArgumentError, Option } from 'commander';

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

/** `--log-level`: the lowest level shown on the terminal. Default: `info`. The debug log (`<dir>/logs/provisioner.log`) always gets everything. */
export function logLevelOption(): Option {
  return new Option('--log-level <level>', 'lowest log level shown (the debug log, <dir>/logs/provisioner.log, gets every level)')
    .choices(['debug', 'info', 'warn', 'error'])
    .env('PROVISIONER_LOG_LEVEL')
    .default('info');
}

/**
 * `--no-progress-timeout <minutes>`: fail a wait after this long without any observable
 * change. Default: 10 minutes (the waits' own default, `defaultNoProgressTimeoutMs`).
 * Commander reads a `--no-` prefix as the negation of `--progress-timeout` and would store
 * the value under `progressTimeout` (so the flag was silently ignored); the option is marked
 * as not negating, and its value lands in `noProgressTimeout`.
 */
export function noProgressTimeoutOption(): Option {
  const option = new Option('--no-progress-timeout <minutes>', 'fail a wait after this long without any observable change (default: 10)')
    .env('PROVISIONER_NO_PROGRESS_TIMEOUT')
    .argParser(minutes);
  option.negate = false;
  return option;
}

/** A number of minutes greater than 0, as a flag value. */
function minutes(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError('expected a number of minutes greater than 0');
  return n;
}

/**
 * `--listen-address <ip>`: the one address besides loopback where the local control plane's
 * API server listens, for hosts (a forwarder serves it; the API server's certificate names
 * it). Default: none, loopback only (for `create cluster`, the install config's
 * `bootstrap.listenAddress`, which this flag overrides).
 */
export function listenAddressOption(): Option {
  return new Option('--listen-address <ip>', 'also serve the API server on this address of this machine, for hosts to reach (default: none, loopback only)')
    .env('PROVISIONER_LISTEN_ADDRESS');
}
