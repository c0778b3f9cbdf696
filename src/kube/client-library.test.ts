/**
 * When the Kubernetes client library is imported: a child Node sends one request through
 * KubeClient to a local https server, with a module hook recording what it imports. A
 * kubeconfig of certificates (what this tool writes) needs no library; an exec plugin's does.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { importsPackage, ModuleRecorder, repoRoot } from '../../test/support/module-recorder.js';
import { TestApiServer } from '../../test/support/test-api-server.js';

const library = '@kubernetes/client-node';

interface Kubeconfig {
  users: { name: string; user: Record<string, string> }[];
}

describe('the client library', { timeout: 60_000 }, () => {
  let server: TestApiServer;
  let recorder: ModuleRecorder;
  let dir: string;
  let script: string;

  beforeAll(async () => {
    server = await TestApiServer.start();
    server.handler = (_request, response) => void response.writeHead(200, { 'content-type': 'application/json' }).end('{"gitVersion":"v1.35.0"}');
    recorder = await ModuleRecorder.create();
    dir = await mkdtemp(path.join(tmpdir(), 'client-library-'));
    script = path.join(dir, 'request.mts');
    const client = pathToFileURL(path.join(repoRoot, 'src/kube/client.ts')).href;
    await writeFile(script, `import { KubeClient } from ${JSON.stringify(client)};\nconst client = KubeClient.fromFile(process.argv[2]!);\nprocess.stdout.write(await client.raw('/version'));\nclient.close();\n`);
  });

  afterAll(async () => {
    await server.close();
    await recorder.remove();
    await rm(dir, { recursive: true, force: true });
  });

  it('is not imported for a kubeconfig of certificates', async () => {
    const run = await recorder.run(script, [server.kubeconfig]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe('{"gitVersion":"v1.35.0"}');
    // The recorder saw the client load: an empty log would pass the check below for nothing.
    expect(run.urls.some((url) => url.endsWith('/src/kube/client.ts'))).toBe(true);
    expect(importsPackage(run.urls, library)).toBe(false);
  });

  it("is imported for a user whose exec plugin gives the credential, and the request carries the plugin's", async () => {
    const written = parse(await readFile(server.kubeconfig, 'utf8')) as Kubeconfig;
    const user = written.users[0]!.user;
    const pem = (base64: string | undefined) => Buffer.from(base64 ?? '', 'base64').toString('utf8');
    const credential = {
      apiVersion: 'client.authentication.k8s.io/v1',
      kind: 'ExecCredential',
      status: { clientCertificateData: pem(user['client-certificate-data']), clientKeyData: pem(user['client-key-data']) },
    };
    await writeFile(path.join(dir, 'credential.json'), JSON.stringify(credential), { mode: 0o600 });
    await writeFile(path.join(dir, 'plugin.sh'), `#!/bin/sh\ncat "${path.join(dir, 'credential.json')}"\n`, { mode: 0o700 });
    const exec = { apiVersion: 'client.authentication.k8s.io/v1', command: path.join(dir, 'plugin.sh'), interactiveMode: 'Never' };
    const kubeconfig = path.join(dir, 'exec.kubeconfig');
    await writeFile(kubeconfig, stringify({ ...written, users: [{ name: written.users[0]!.name, user: { exec } }] }), { mode: 0o600 });
    const run = await recorder.run(script, [kubeconfig]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe('{"gitVersion":"v1.35.0"}');
    expect(importsPackage(run.urls, library)).toBe(true);
  });
});
