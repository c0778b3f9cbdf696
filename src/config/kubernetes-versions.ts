/**
 * Which Kubernetes versions a cluster may run. The range is the workload-cluster support
 * of the bundled Cluster API (v1.14.x supports workload clusters from v1.31 to v1.37, per
 * its book's "Supported versions matrix"); the default is the bundled kube-apiserver.
 */

/** The Kubernetes version of the bundled control plane; the install config's default. */
export const defaultKubernetesVersion = 'v1.36.3';

/** Lowest supported minor (inclusive). */
const minKubernetesMinor = { major: 1, minor: 31 } as const;
/** Highest supported minor (inclusive). */
const maxKubernetesMinor = { major: 1, minor: 37 } as const;

const kubernetesVersionPattern = /^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$/;

/** Returns the problem with `version`, or undefined when it is supported. */
export function checkKubernetesVersion(version: string): string | undefined {
  const match = kubernetesVersionPattern.exec(version);
  if (!match) return `${JSON.stringify(version)} is not a version like ${defaultKubernetesVersion}`;
  const major = Number(match[1]);
  const minor = Number(match[2]);
  const below = major < minKubernetesMinor.major || (major === minKubernetesMinor.major && minor < minKubernetesMinor.minor);
  const above = major > maxKubernetesMinor.major || (major === maxKubernetesMinor.major && minor > maxKubernetesMinor.minor);
  if (below || above) return `${version} is outside the supported range ${supportedRangeText()}`;
  return undefined;
}

export function supportedRangeText(): string {
  return `v${minKubernetesMinor.major}.${minKubernetesMinor.minor}.0 to v${maxKubernetesMinor.major}.${maxKubernetesMinor.minor}.x`;
}
