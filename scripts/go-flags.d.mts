// Types of go-flags.mjs, which run-tests.mjs imports with plain Node (no build step).

export const sharedGoFlags: string;
