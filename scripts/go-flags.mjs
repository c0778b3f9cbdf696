// The Go flags every compile here shares: the bundle's builds (scripts/bundle/build.ts) and the go
// tier (scripts/ci/run-tests.mjs). Go's build cache reuses a compiled package only when the flags
// it was compiled with match, so the go tier takes the Kubernetes and Cluster API packages the
// bundle compiled instead of compiling them again. Plain JavaScript: run-tests.mjs runs without a
// build step.

/**
 * Added to GOFLAGS (space-separated, no value holds a space):
 * - `-trimpath`: no path of this machine in a binary (reproducible builds).
 * - `-gcflags=all=-dwarf=false`: the compiler writes no debug information. The bundle links with
 *   `-s -w`, which throws DWARF away, so the binaries run the same; compiling without it took
 *   11-13 % less time (the etcd wrapper from an empty build cache: 90.1 / 93.4 s against 80.1 /
 *   81.5 s, docs/testing.md "Cold"). The go tier's test binaries have no DWARF either: a
 *   failing test's stack trace comes from the pclntab, which stays.
 */
export const sharedGoFlags = '-trimpath -gcflags=all=-dwarf=false';
