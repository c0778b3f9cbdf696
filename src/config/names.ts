/** Kubernetes name, label and duration rules, as the API server applies them. */

/** RFC 1123 label: lowercase letters, digits and '-', starting and ending alphanumeric, ≤ 63. */
export const dns1123Label = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
/** RFC 1035 label: as RFC 1123 but starting with a letter. */
export const dns1035Label = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
/** RFC 1123 subdomain: dot-separated labels, ≤ 253. */
export const dns1123Subdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
/** A label value: empty, or ≤ 63 of alphanumerics, '-', '_', '.', starting and ending alphanumeric. */
export const labelValuePattern = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
/** A Go duration as metav1.Duration parses it: `30s`, `5m`, `1h30m`, `1.5s`. */
export const durationPattern = /^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$/;

const qualifiedNamePart = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;

/** Checks a qualified name (`prefix/name` or `name`) as label and taint keys use; returns the problem. */
export function checkQualifiedName(key: string): string | undefined {
  const slash = key.indexOf('/');
  const prefix = slash >= 0 ? key.slice(0, slash) : undefined;
  const name = slash >= 0 ? key.slice(slash + 1) : key;
  if (prefix !== undefined) {
    if (prefix.length === 0) return `${JSON.stringify(key)} has an empty prefix before '/'`;
    if (prefix.length > 253 || !dns1123Subdomain.test(prefix)) return `prefix ${JSON.stringify(prefix)} is not a DNS subdomain (lowercase, dot-separated)`;
  }
  if (name.length === 0) return `${JSON.stringify(key)} has an empty name`;
  if (name.length > 63) return `name part of ${JSON.stringify(key)} is longer than 63 characters`;
  if (!qualifiedNamePart.test(name)) return `${JSON.stringify(name)} must be alphanumerics, '-', '_' or '.', starting and ending alphanumeric`;
  return undefined;
}

/** Nanoseconds in one of each unit a Go duration may use. */
const nanosecondsPer: Record<string, number> = { ns: 1, us: 1e3, µs: 1e3, ms: 1e6, s: 1e9, m: 60e9, h: 3600e9 };

/**
 * Parses a Go duration (`durationPattern`) into milliseconds, fractions kept (`500us` is 0.5).
 * The one parser: the schema validates with its pattern and the runtime turns the same text
 * into a deadline with this, so a value the schema accepts never means something else at run time.
 */
export function durationToMs(text: string): number {
  if (!durationPattern.test(text)) throw new Error(`${JSON.stringify(text)} is not a duration such as 30s, 5m or 1h30m`);
  let nanoseconds = 0;
  for (const [, amount, unit] of text.matchAll(/([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)/g)) {
    nanoseconds += Number(amount) * (nanosecondsPer[unit as string] as number);
  }
  return nanoseconds / 1e6;
}
