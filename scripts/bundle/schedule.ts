/**
 * The order of the bundle's Go builds. Binaries whose module graphs pin the same Kubernetes
 * libraries (the same k8s.io/apimachinery version, so the same client-go and api) compile
 * the same packages: built one after another, the second takes the first's compiled
 * packages from Go's build cache, where two at once would each compile them. So each such
 * family is one queue, run in order; different families share little and run beside each
 * other, so one build's downloads, link and gzip (one core each) fill the CPU the other
 * leaves idle.
 */

/** Groups items into families (first appearance order kept within each), the largest family first. */
export function buildFamilies<T>(items: readonly T[], familyOf: (item: T) => string): T[][] {
  const families = new Map<string, T[]>();
  for (const item of items) {
    const key = familyOf(item);
    const family = families.get(key);
    if (family) family.push(item);
    else families.set(key, [item]);
  }
  // Largest first, so the long family starts at once and the small ones fill the other worker.
  return [...families.values()].sort((a, b) => b.length - a.length);
}

/**
 * Runs `families` on `workers` workers: each takes the next family and runs its items one after
 * another. After the first failure no worker starts another item; the builds under way finish,
 * then the first error is thrown.
 */
export async function runFamilies<T>(families: readonly (readonly T[])[], workers: number, run: (item: T) => Promise<void>): Promise<void> {
  const queue = [...families];
  let failure: { error: unknown } | undefined;
  const worker = async (): Promise<void> => {
    for (let family = queue.shift(); family && !failure; family = queue.shift()) {
      for (const item of family) {
        if (failure) return;
        try {
          await run(item);
        } catch (error) {
          failure ??= { error };
          return;
        }
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, workers) }, worker));
  if (failure) throw failure.error;
}
