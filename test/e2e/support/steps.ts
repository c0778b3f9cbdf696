/**
 * A step several tests of a file stand on (a `create cluster`, a host's `kubeadm init`),
 * run at most once per file: the first test that needs it runs it (its assertions fail that
 * test), every later one gets the same outcome: its result, or the same error at once. A test
 * calls the steps it stands on itself, so it also passes alone (`vitest run -t '<its
 * name>'`): nothing depends on an earlier test having run.
 */
export function step<T>(run: () => Promise<T>): () => Promise<T> {
  let outcome: Promise<T> | undefined;
  return () => (outcome ??= run());
}
