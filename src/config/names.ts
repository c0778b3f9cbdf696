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

/** Parses a Go duration into milliseconds (assumes `durationPattern` matched). */
export function durationToMs(text: string): number {
  const units: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  let total = 0;
  for (const match of text.matchAll(/([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)/g)) {
    total += Number(match[1]) * (units[match[2] ?? 's'] ?? 0);
  }
  return total;
}
