/**
 * The key of a cached build: a hash of everything that decides the bytes `go build`
 * writes, and of nothing else. In particular not of where the checkout lives or when
 * its files were touched: a second checkout of the same commit (or a CI workspace at
 * another path) must find the builds the first one cached.
 *
 * The same goes for what the build itself records: a binary must not name a path of
 * the machine that built it, or the same sources would give another sha256 elsewhere.
 */
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';

/** One file that defines a module's build, named relative to the module directory (with `/`). */
export interface WrapperInput {
  /** File name inside the module directory, e.g. `go.mod` or `internal/agent/run.go`. */
  name: string;
  content: Buffer;
}

/**
 * Files that define a wrapper module's build: go.mod, go.sum and its Go sources (its own
 * mains too, e.g. the kubernetes wrapper's cmd/kube), sorted by relative name: the same
 * selection as one of our own modules'; then those of every module of this repository its
 * go.mod replaces to a directory (capi's `provisioner.dev/provider => ../../../provider`),
 * named by that directory (`../../../provider/go.mod`), so an edit there changes the key too.
 */
export async function readWrapperInputs(wrapperDir: string): Promise<WrapperInput[]> {
  const inputs = await readModuleInputs(wrapperDir);
  const goMod = inputs.find((input) => input.name === 'go.mod');
  for (const local of goMod ? localReplaces(goMod.content.toString('utf8')) : []) {
    for (const input of await readModuleInputs(path.join(wrapperDir, local.dir))) inputs.push({ name: `${local.dir}/${input.name}`, content: input.content });
  }
  return inputs;
}

/** A go.mod `replace` of a module by a directory of this repository (a relative path). */
export interface LocalReplace {
  /** The replace line as written. */
  line: string;
  module: string;
  /** The directory, relative to the go.mod's, with `/`, e.g. `../../../provider`. */
  dir: string;
}

/** The replace lines of a go.mod that point a module at a relative directory. */
export function localReplaces(goMod: string): LocalReplace[] {
  const found: LocalReplace[] = [];
  for (const match of goMod.matchAll(/^replace\s+(\S+)(?:\s+\S+)?\s+=>\s+(\.\.?\/\S*)\s*$/gm)) {
    found.push({ line: match[0], module: match[1]!, dir: match[2]!.replace(/\/+$/, '') });
  }
  return found;
}

/**
 * Files that define the build of one of our own modules (e.g. provider/): go.mod, go.sum
 * and every non-test Go source in every package below it, sorted by relative path, so an
 * edit in any subpackage changes the key. Tests (`_test.go`), `testdata` and build output
 * (`bin`) never reach the binary and are left out.
 */
export async function readModuleInputs(moduleDir: string): Promise<WrapperInput[]> {
  const entries = await readdir(moduleDir, { recursive: true, withFileTypes: true });
  const names = entries
    .filter((e) => e.isFile())
    .map((e) => path.relative(moduleDir, path.join(e.parentPath, e.name)).split(path.sep).join('/'))
    .filter((name) => !name.split('/').some((part) => part === 'testdata' || part === 'bin' || part.startsWith('.')))
    .filter((name) => name === 'go.mod' || name === 'go.sum' || (name.endsWith('.go') && !name.endsWith('_test.go')))
    .sort();
  return Promise.all(names.map(async (name) => ({ name, content: await readFile(path.join(moduleDir, name)) })));
}

/** What a build's output depends on besides the wrapper's files. */
export interface BuildKeyParts {
  /** Bumped by build.ts when it changes how it builds. */
  builderRevision: string;
  /** The recipe entry (name, package, stamp...): plain data. */
  recipe: object;
  ldflags: string;
  /** Name (not path) of the patched-module wrapper built in, or `none`. */
  patched: string;
  /** `go version` output. */
  goVersion: string;
  /** The Go environment of the build (GOOS, GOARCH, CGO_ENABLED, GOFLAGS...). */
  env: Record<string, string>;
  inputs: readonly WrapperInput[];
}

/** 32 hex digits naming the build's directory in the build cache. */
export function buildKey(parts: BuildKeyParts): string {
  const { inputs, ...rest } = parts;
  const hash = createHash('sha256').update(JSON.stringify(rest));
  for (const input of inputs) hash.update(`\0${input.name}\0${input.content.length}\0`).update(input.content);
  return hash.digest('hex').slice(0, 32);
}

/**
 * The go.mod line that points a module at its patched copy. The patched wrapper lives in
 * `<build cache>/wrappers/<name>` and the copy in `<build cache>/patched/<copyName>`; the
 * path is relative because Go records a directory replacement's path in the binary's
 * build info (even with -trimpath), and an absolute one would carry the build cache's
 * location (the user's home directory) into the sha256.
 */
export function patchedReplace(module: string, version: string, copyName: string): string {
  return `replace ${module} ${version} => ../../patched/${copyName}`;
}
