/**
 * A child's environment, built from an allow-list instead of inherited: a control-plane
 * process gets no stray credentials (a cloud's keys, KUBECONFIG, tokens) from the user's shell,
 * and never a proxy for loopback traffic. Credentials go to children by file: a variable
 * naming the file's path, never its content.
 */

/** Variables passed through from the parent by default. */
const defaultEnvAllowList: readonly string[] = ['PATH', 'HOME', 'TMPDIR', 'LANG', 'TZ'];
/** Always in NO_PROXY/no_proxy, so a user's HTTP(S)_PROXY (if allowed through) never carries loopback traffic. */
const loopbackNoProxy: readonly string[] = ['127.0.0.1', '::1', 'localhost'];

export interface ChildEnvOptions {
  /** Extra variable names to pass through from the parent, e.g. `HTTPS_PROXY`. Default none. */
  allow?: readonly string[];
  /** Explicit values; they win over passed-through ones. Default none. */
  extra?: Readonly<Record<string, string>>;
  /** Where passed-through values come from. Default `process.env`. */
  source?: NodeJS.ProcessEnv;
}

/**
 * PATH, HOME, TMPDIR, LANG, TZ (when set) plus `allow`ed names from `source`, then `extra`;
 * NO_PROXY and no_proxy both set to the union of any given values and 127.0.0.1, ::1, localhost.
 */
export function buildChildEnv(options: ChildEnvOptions = {}): Record<string, string> {
  const source = options.source ?? process.env;
  const env: Record<string, string> = {};
  for (const name of [...defaultEnvAllowList, ...(options.allow ?? [])]) {
    const value = source[name];
    if (value !== undefined) env[name] = value;
  }
  Object.assign(env, options.extra ?? {});
  const noProxy = new Set<string>();
  for (const value of [env.NO_PROXY, env.no_proxy]) {
    for (const item of (value ?? '').split(',')) if (item.trim() !== '') noProxy.add(item.trim());
  }
  for (const item of loopbackNoProxy) noProxy.add(item);
  env.NO_PROXY = env.no_proxy = [...noProxy].join(',');
  return env;
}
