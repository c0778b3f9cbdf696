import { generateKeyPairSync, X509Certificate } from 'node:crypto';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { describe, expect, it } from 'vitest';
import { createRedactStream, findSecrets, knownValuesPattern, redacted, redactObject, redactText, Redactor, secretValuesToMatch } from './redact.js';

const rsa = generateKeyPairSync('rsa', { modulusLength: 1024 });
const rsaPem = rsa.privateKey.export({ type: 'pkcs1', format: 'pem' }).toString(); // BEGIN RSA PRIVATE KEY
const pkcs8Pem = rsa.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(); // BEGIN PRIVATE KEY
const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const ecPem = ec.privateKey.export({ type: 'sec1', format: 'pem' }).toString(); // BEGIN EC PRIVATE KEY
const encryptedPem = rsa.privateKey.export({ type: 'pkcs1', format: 'pem', cipher: 'aes-128-cbc', passphrase: 'x' }).toString();
/** A body line of each key: none may survive. */
const bodyOf = (pem: string) => pem.split('\n').filter((l) => /^[A-Za-z0-9+/=]{40,}$/.test(l));

// A real certificate (public): must pass unchanged.
const certPem = `-----BEGIN CERTIFICATE-----
MIIBhTCCASugAwIBAgIQIRi6zePL6mKjOipn+dNuaTAKBggqhkjOPQQDAjASMRAw
DgYDVQQKEwdBY21lIENvMB4XDTE3MTAyMDE5NDMwNloXDTE4MTAyMDE5NDMwNlow
EjEQMA4GA1UEChMHQWNtZSBDbzBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABD0d
7VNhbWvZLWPuj/RtHFjvtJBEwOkhbN/BnnE8rnZR8+sbwnc/KhCk3FhnpHZnQz7B
5aETbbIgmuvewdjvSBSjYzBhMA4GA1UdDwEB/wQEAwICpDATBgNVHSUEDDAKBggr
BgEFBQcDATAPBgNVHRMBAf8EBTADAQH/MCkGA1UdEQQiMCCCDmxvY2FsaG9zdDo1
NDUzgg4xMjcuMC4wLjE6NTQ1MzAKBggqhkjOPQQDAgNIADBFAiEA2zpJEPQyz6/l
Wf86aX6PepsntZv2GYlA5UpabfT2EZICICpJ5h/iI+i341gBmLiAFQOyTDT+/wQc
6MF9+Yw1Yy0t
-----END CERTIFICATE-----
`;

const jwt =
  'eyJhbGciOiJSUzI1NiIsImtpZCI6IjEyMyJ9.eyJpc3MiOiJrdWJlcm5ldGVzL3NlcnZpY2VhY2NvdW50Iiwic3ViIjoic3lzdGVtOnNhOmRlZmF1bHQifQ.c2lnbmF0dXJlLWJ5dGVzLWhlcmUtMTIzNDU2Nzg5MA';
const b64 = (s: string) => Buffer.from(s).toString('base64');

/** The ordinary CAPI YAML of an install: must come out byte for byte. */
const capiYaml = `apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata:
  name: demo
  namespace: demo
  labels:
    cluster.x-k8s.io/cluster-name: demo
spec:
  clusterNetwork:
    pods:
      cidrBlocks: ["192.168.0.0/16"]
    services:
      cidrBlocks:
      - 10.128.0.0/12
  controlPlaneEndpoint:
    host: 127.0.0.1
    port: 6443
  controlPlaneRef:
    apiGroup: controlplane.cluster.x-k8s.io
    kind: KubeadmControlPlane
    name: demo-control-plane
  infrastructureRef:
    apiGroup: infrastructure.cluster.x-k8s.io
    kind: DevCluster
    name: demo
status:
  phase: Provisioning
  conditions:
  - type: Available
    status: "False"
    reason: NotAvailable
    message: "* InfrastructureReady: Waiting for DevCluster to report status.initialization.provisioned"
    lastTransitionTime: "2025-01-01T00:00:00Z"
---
apiVersion: controlplane.cluster.x-k8s.io/v1beta2
kind: KubeadmControlPlane
metadata:
  name: demo-control-plane
  namespace: demo
spec:
  replicas: 3
  version: v1.34.1
  kubeadmConfigSpec:
    initConfiguration:
      nodeRegistration:
        kubeletExtraArgs:
        - name: eviction-hard
          value: nodefs.available<0%
    joinConfiguration:
      discovery:
        bootstrapToken:
          unsafeSkipCAVerification: false
        tlsBootstrapToken: ""
    users:
    - name: capi
      lockPassword: false
      sshAuthorizedKeys:
      - ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKhe3yqvOFY+V7EzRVmMB5yRmLZ5ni2ZqTPa+2YXpRCP capi@example
    files:
    - path: /etc/kubernetes/audit-policy.yaml
      permissions: "0600"
      contentFrom:
        secret:
          name: demo-audit
          key: policy
    bootstrapTokenTTL: 15m
---
apiVersion: cluster.x-k8s.io/v1beta2
kind: MachineDeployment
metadata:
  name: demo-md-0
  namespace: demo
  annotations:
    cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size: "1"
spec:
  clusterName: demo
  replicas: 2
  template:
    spec:
      clusterName: demo
      version: v1.34.1
      bootstrap:
        dataSecretName: demo-md-0-bootstrap
        configRef:
          apiGroup: bootstrap.cluster.x-k8s.io
          kind: KubeadmConfigTemplate
          name: demo-md-0
      infrastructureRef:
        apiGroup: infrastructure.cluster.x-k8s.io
        kind: DevMachineTemplate
        name: demo-md-0
status:
  addresses:
  - type: InternalIP
    address: 10.0.0.12
  nodeRef:
    name: demo-md-0-7b9c5-x2k4p
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: demo-cni
data:
  cni.yaml: |
    apiVersion: v1
    kind: ServiceAccount
    automountServiceAccountToken: false
`;

interface Case {
  name: string;
  input: string;
  /** Exact output, when given. */
  output?: string;
  /** Strings that must not appear in the output. */
  absent?: string[];
  /** Strings that must appear in the output. */
  present?: string[];
}

const positive: Case[] = [
  {
    name: 'an RSA key printed in the middle of a log',
    input: `I0101 first line\n${rsaPem}I0101 after the key\n`,
    output: `I0101 first line\n${redacted}\nI0101 after the key\n`,
  },
  {
    name: 'a PKCS#8 key in a YAML block scalar keeps the YAML around it',
    input: `files:\n- path: /etc/key\n  content: |\n${pkcs8Pem.split('\n').filter(Boolean).map((l) => `    ${l}`).join('\n')}\n  owner: root\n`,
    output: `files:\n- path: /etc/key\n  content: |\n    ${redacted}\n  owner: root\n`,
  },
  {
    name: 'an EC key as a JSON string with \\n escapes, on one line',
    input: `{"level":"info","key":${JSON.stringify(ecPem)},"msg":"loaded"}\n`,
    output: `{"level":"info","key":"${redacted}\\n","msg":"loaded"}\n`,
  },
  {
    name: 'a key cut short by a truncated log: the body goes, the next line stays',
    input: `start\n${rsaPem.split('\n').slice(0, 6).join('\n')}\nE0101 12:00:00 controller.go:1] next message\n`,
    output: `start\n${redacted}\nE0101 12:00:00 controller.go:1] next message\n`,
  },
  {
    name: 'an encrypted PEM with Proc-Type and DEK-Info headers',
    input: `x\n${encryptedPem}y\n`,
    output: `x\n${redacted}\ny\n`,
  },
  {
    name: 'an OpenSSH private key',
    input: '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\nQyNTUxOQAAACCoXt8qrzhWPlexM0VZjAeckpi2eZ4tmakz2vtmF6UQjwAAAJi0ttFxtLbR\n-----END OPENSSH PRIVATE KEY-----\nok\n',
    output: `${redacted}\nok\n`,
  },
  {
    name: 'a key mentioned mid-line and cut off',
    input: 'failed to parse -----BEGIN RSA PRIVATE KEY-----\\nMIICXAIBAAKBgQC7 (truncated)\n',
    output: `failed to parse ${redacted}\n`,
  },
  {
    name: 'kubeconfig credentials: key, certificate and token values',
    input: `apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: ${b64('ca')}\n    server: https://127.0.0.1:6443\n  name: c\nusers:\n- name: admin\n  user:\n    client-certificate-data: ${b64('cert')}\n    client-key-data: ${b64('key')}\n    token: 0123456789abcdef0123\n`,
    output: `apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: ${b64('ca')}\n    server: https://127.0.0.1:6443\n  name: c\nusers:\n- name: admin\n  user:\n    client-certificate-data: ${redacted}\n    client-key-data: ${redacted}\n    token: ${redacted}\n`,
  },
  {
    name: 'a base64 PEM private key under any field name',
    input: `  tls.key: ${b64(rsaPem)}\n  other: ${b64(certPem)}\n`,
    output: `  tls.key: ${redacted}\n  other: ${b64(certPem)}\n`,
  },
  {
    name: 'a bearer token in a dumped request',
    input: 'GET /api/v1/pods HTTP/1.1\nAuthorization: Bearer 8f14e45fceea167a5a36dedd4bea2543\nAccept: application/json\n',
    absent: ['8f14e45fceea167a5a36dedd4bea2543'],
    present: ['Accept: application/json', 'GET /api/v1/pods HTTP/1.1'],
  },
  {
    name: 'a bearer token in a Go header map',
    input: 'headers=map[Authorization:[Bearer abcdEFGH12345678zz] User-Agent:[capi]]\n',
    output: `headers=map[Authorization:[Bearer ${redacted}] User-Agent:[capi]]\n`,
  },
  {
    name: 'basic auth',
    input: 'Authorization: Basic dXNlcjpodW50ZXIy\n',
    absent: ['dXNlcjpodW50ZXIy'],
  },
  {
    name: 'a service-account JWT in a log line',
    input: `I0101 using token ${jwt} for the webhook\n`,
    output: `I0101 using token ${redacted} for the webhook\n`,
  },
  {
    name: 'an AWS access key id and secret key in a shared credentials file',
    input: '[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\nregion = us-east-1\n',
    output: `[default]\naws_access_key_id = ${redacted}\naws_secret_access_key = ${redacted}\nregion = us-east-1\n`,
  },
  {
    name: 'AWS keys as environment assignments and JSON',
    input: 'AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY AWS_SESSION_TOKEN=FwoGZXIvYXdzEBYaDH\n{"SecretAccessKey":"abc/def+ghi","AccessKeyId":"ASIAIOSFODNN7EXAMPLE"}\n',
    absent: ['wJalrXUtnFEMI', 'FwoGZXIvYXdzEBYaDH', 'abc/def+ghi', 'ASIAIOSFODNN7EXAMPLE'],
    present: ['AWS_SECRET_ACCESS_KEY=', '"AccessKeyId"'],
  },
  {
    name: 'a password in a URL',
    input: 'proxy: http://alice:s3cr3t-pw@proxy.example.com:3128/ and git https://bob:tok3n@github.com/x.git\n',
    output: `proxy: http://alice:${redacted}@proxy.example.com:3128/ and git https://bob:${redacted}@github.com/x.git\n`,
  },
  {
    name: 'a Secret as kubectl prints it (data before kind): values go, keys stay',
    input: `apiVersion: v1\ndata:\n  value: ${b64('kubeconfig-content')}\n  ca.crt: ${b64('ca')}\nkind: Secret\nmetadata:\n  name: demo-kubeconfig\ntype: cluster.x-k8s.io/secret\n`,
    output: `apiVersion: v1\ndata:\n  value: ${redacted}\n  ca.crt: ${redacted}\nkind: Secret\nmetadata:\n  name: demo-kubeconfig\ntype: cluster.x-k8s.io/secret\n`,
  },
  {
    name: 'Secrets inside a List, kind after data, next to a ConfigMap',
    input: `apiVersion: v1\nitems:\n- apiVersion: v1\n  data:\n    k: ${b64('secret-one')}\n  kind: Secret\n  metadata:\n    name: a\n- apiVersion: v1\n  data:\n    k: plain-config\n  kind: ConfigMap\n  metadata:\n    name: b\nkind: List\n`,
    output: `apiVersion: v1\nitems:\n- apiVersion: v1\n  data:\n    k: ${redacted}\n  kind: Secret\n  metadata:\n    name: a\n- apiVersion: v1\n  data:\n    k: plain-config\n  kind: ConfigMap\n  metadata:\n    name: b\nkind: List\n`,
  },
  {
    name: 'stringData with a multi-line value, kind first',
    input: 'kind: Secret\napiVersion: v1\nstringData:\n  cloud.conf: |\n    [Global]\n    secret = hunter2\n  user: admin\nmetadata:\n  name: creds\n',
    output: `kind: Secret\napiVersion: v1\nstringData:\n  cloud.conf: ${redacted}\n  user: ${redacted}\nmetadata:\n  name: creds\n`,
  },
  {
    name: 'a Secret in flow style',
    input: 'kind: Secret\ndata: {user: YWRtaW4=, pass: aHVudGVyMg==}\n',
    output: `kind: Secret\ndata: {user: ${redacted}, pass: ${redacted}}\n`,
  },
  {
    name: 'a Secret as JSON in a log line, plain and escaped inside a message',
    input: `{"kind":"Secret","apiVersion":"v1","data":{"value":"${b64('s1')}","x":"${b64('s2')}"}}\nI0101 msg="object: {\\"kind\\":\\"Secret\\",\\"data\\":{\\"value\\":\\"${b64('s3')}\\"}}"\n`,
    absent: [b64('s1'), b64('s2'), b64('s3')],
    present: ['"value":"[REDACTED]"', '\\"value\\":\\"[REDACTED]\\"'],
  },
  {
    name: 'kubeadm bootstrap tokens in YAML and on a command line',
    input: 'discovery:\n  bootstrapToken:\n    token: abcdef.0123456789abcdef\nrunning kubeadm join 10.0.0.1:6443 --token 7x9k2p.q8w3e5r7t9y1u2i4 --discovery-token-ca-cert-hash sha256:1234\n',
    output: `discovery:\n  bootstrapToken:\n    token: ${redacted}\nrunning kubeadm join 10.0.0.1:6443 --token ${redacted} --discovery-token-ca-cert-hash sha256:1234\n`,
  },
  {
    name: 'a password given as a YAML block scalar',
    input: 'users:\n- name: root\n  password: |\n    correct horse battery staple\n  shell: /bin/bash\n',
    output: `users:\n- name: root\n  password: |\n    ${redacted}\n  shell: /bin/bash\n`,
  },
  {
    name: 'flags and logfmt',
    input: 'args: --token=s3cr3tvalue --client-secret=abc123 --v=4\nlevel=info password="two words" user=bob token-secret=0123456789abcdef\n',
    output: `args: --token=${redacted} --client-secret=${redacted} --v=4\nlevel=info password="${redacted}" user=bob token-secret=${redacted}\n`,
  },
];

const negative: Case[] = [
  { name: 'a certificate', input: `cert:\n${certPem}done\n` },
  { name: 'ordinary CAPI YAML (Cluster, KubeadmControlPlane, MachineDeployment, ConfigMap)', input: capiYaml },
  {
    name: 'controller logs that name Secrets and talk about tokens',
    input: [
      'I1122 04:41:27.665123       1 controller.go:123] "Reconciling" Secret="demo/demo-kubeconfig" reconcileID="9c7f1a2e-2f1d-4c1b-8c6e-3c9a5b2f7d10"',
      '{"level":"info","msg":"Secret created","Secret":{"name":"demo-ca","namespace":"demo"},"controller":"kubeadmconfig"}',
      'E1122 04:41:28.000000       1 authentication.go:73] "Unable to authenticate the request" err="invalid bearer token"',
      'W1122 token expired, using the bearer authentication fallback',
      'I1122 serving on https://127.0.0.1:6443/api and http://[::1]:8080/metrics',
      'I1122 image registry.k8s.io/pause@sha256:7031c1b283388d2c2e09b57badb803c05ebed362dc88d84b480cc47f72a21097 commit=4d1a3e4c8a5f2b6e9d0c7b1a2f3e4d5c6b7a8f9e',
      'automountServiceAccountToken: false',
      'tokenTTL: 24h0m0s',
      'passwordSecretRef:',
      '  name: x',
    ].join('\n') + '\n',
  },
  {
    name: 'a log with a bare "data:" line and no kind: nothing is held back for good',
    input: 'I0101 dumping\ndata:\n  k: v\nI0101 next line\n',
  },
  {
    name: 'a ConfigMap printed data-first',
    input: 'apiVersion: v1\ndata:\n  config: plain\nkind: ConfigMap\n',
  },
];

describe('redactText corpus', () => {
  it.each(positive)('redacts $name', ({ input, output, absent, present }) => {
    const result = redactText(input);
    if (output !== undefined) expect(result.text).toBe(output);
    for (const s of absent ?? []) expect(result.text).not.toContain(s);
    for (const s of present ?? []) expect(result.text).toContain(s);
    expect(result.total).toBeGreaterThan(0);
    expect(result.text).toContain(redacted);
  });

  it.each(negative)('leaves $name unchanged', ({ input }) => {
    const result = redactText(input);
    expect(result.text).toBe(input);
    expect(result.total).toBe(0);
  });

  it('has at least 25 cases', () => {
    expect(positive.length + negative.length).toBeGreaterThanOrEqual(25);
  });

  it('is idempotent, and the detector finds nothing in what it wrote', () => {
    for (const { input } of [...positive, ...negative]) {
      const once = redactText(input).text;
      expect(redactText(once).text).toBe(once);
      for (const line of once.split('\n')) expect(findSecrets(line)).toEqual([]);
    }
  });

  it('the detector finds the keys and tokens in the originals', () => {
    expect(findSecrets(rsaPem.split('\n')[0]!)).toContain('private-key');
    expect(findSecrets(`client-key-data: ${b64(rsaPem)}`)).toContain('private-key-base64');
    expect(findSecrets(`client-key-data: ${b64('any')}`)).toEqual(['credential-field']);
    expect(findSecrets(`Authorization: Bearer ${jwt}`)).toContain('jwt');
    expect(findSecrets('Authorization: Bearer 8f14e45fceea167a5a36dedd4bea2543')).toContain('bearer-token');
    expect(findSecrets('key AKIAIOSFODNN7EXAMPLE')).toContain('aws-access-key-id');
    expect(findSecrets('token: abcdef.0123456789abcdef')).toContain('bootstrap-token');
    expect(findSecrets('https://u:p4ss@host/')).toContain('url-password');
    expect(findSecrets('I0101 an ordinary line with Secret="a/b"')).toEqual([]);
  });

  it('keeps CRLF line ends and a missing final newline', () => {
    expect(redactText('a\r\ntoken: abc123\r\nb').text).toBe(`a\r\ntoken: ${redacted}\r\nb`);
    expect(redactText('no newline').text).toBe('no newline');
  });
});

describe('known Secret values', () => {
  it('picks the values worth matching: base64 and one-line decoded, not short or plain words', () => {
    const values = secretValuesToMatch({ a: b64('sup3r-s3cret-value'), b: b64('cloud-config'), c: b64('short'), d: b64('line one\nline two') });
    expect(values).toEqual([b64('sup3r-s3cret-value'), 'sup3r-s3cret-value', b64('cloud-config'), b64('line one\nline two')]);
    expect(secretValuesToMatch(undefined)).toEqual([]);
  });

  it('replaces them anywhere, and the detector reports them', () => {
    const known = knownValuesPattern(['sup3r-s3cret-value', 'a.b*c(d)e+f?g']);
    expect(known).toBeDefined();
    const text = 'leaked sup3r-s3cret-value and a.b*c(d)e+f?g here\nbut not a.bbbc here\n';
    const result = redactText(text, { knownValues: known! });
    expect(result.text).toBe(`leaked ${redacted} and ${redacted} here\nbut not a.bbbc here\n`);
    expect(result.counts['secret-data']).toBe(2);
    expect(findSecrets('x sup3r-s3cret-value', known)).toEqual(['secret-data']);
    expect(findSecrets(result.text.split('\n')[0]!, known)).toEqual([]);
    expect(knownValuesPattern([])).toBeUndefined();
  });
});

describe('streaming', () => {
  const log = `I0101 before\n${rsaPem}I0101 between\n${pkcs8Pem}{"token":"zz9988776655"}\nAuthorization: Bearer 8f14e45fceea167a5a36dedd4bea2543\nI0101 after ünïcode ✓\n`;
  const whole = redactText(log).text;

  it('gives the same output whatever the chunk boundaries (a PEM split across chunks)', () => {
    for (const size of [1, 2, 3, 7, 13, 64, 100, 1000]) {
      const r = new Redactor();
      let out = '';
      for (let i = 0; i < log.length; i += size) out += r.write(log.slice(i, i + size));
      out += r.end();
      expect(out, `chunk size ${size}`).toBe(whole);
    }
    for (const l of [...bodyOf(rsaPem), ...bodyOf(pkcs8Pem)]) expect(whole).not.toContain(l);
    expect(whole).toContain('I0101 between');
  });

  it('redacts bytes through a Transform, with multi-byte characters split across chunks', async () => {
    const bytes = Buffer.from(log);
    const chunks: Buffer[] = [];
    for (let i = 0; i < bytes.length; i += 5) chunks.push(bytes.subarray(i, i + 5));
    const stream = createRedactStream();
    const out = (await buffer(Readable.from(chunks).pipe(stream))).toString('utf8');
    expect(out).toBe(whole);
    expect(stream.redactor.counts['private-key']).toBe(2);
    expect(stream.redactor.total).toBeGreaterThanOrEqual(4);
  });

  it('keeps up with a large log (50k lines) in bounded time', () => {
    const line = 'I1122 04:41:27.665123       1 machine_controller.go:312] "Reconciling Machine" controller="machine" Machine="demo/demo-md-0-x2k4p" reconcileID="9c7f1a2e"\n';
    const text = line.repeat(50_000);
    const started = performance.now();
    const r = new Redactor();
    let size = 0;
    for (let i = 0; i < text.length; i += 65536) size += r.write(text.slice(i, i + 65536)).length;
    size += r.end().length;
    expect(size).toBe(text.length);
    expect(performance.now() - started).toBeLessThan(10_000);
  });
});

describe('redactObject', () => {
  it('replaces a Secret\'s data values and its last-applied copy, keeping keys', () => {
    const secret = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name: 's',
        namespace: 'n',
        managedFields: [{ manager: 'x' }],
        annotations: { 'kubectl.kubernetes.io/last-applied-configuration': '{"data":{"a":"c2VjcmV0"}}', keep: 'yes' },
      },
      type: 'Opaque',
      data: { a: 'c2VjcmV0', b: 'b3RoZXI=' },
      stringData: { c: 'plain' },
    };
    const out = redactObject(secret);
    expect(out.data).toEqual({ a: redacted, b: redacted });
    expect(out.stringData).toEqual({ c: redacted });
    expect(out.metadata.annotations).toEqual({ 'kubectl.kubernetes.io/last-applied-configuration': redacted, keep: 'yes' });
    expect(JSON.stringify(out)).not.toContain('c2VjcmV0');
    expect(out.metadata).not.toHaveProperty('managedFields');
    expect(secret.data.a).toBe('c2VjcmV0'); // the input is not modified
  });

  it('drops managedFields of other objects and keeps their data', () => {
    const cm = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c', managedFields: [] }, data: { a: 'b' } };
    expect(redactObject(cm)).toEqual({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c' }, data: { a: 'b' } });
    const list = { kind: 'List', metadata: {}, items: [{ kind: 'Secret', metadata: { name: 'x' }, data: { k: 'dg==' } }] };
    expect(JSON.stringify(redactObject(list))).not.toContain('dg==');
  });

  it('the certificate fixture is a real certificate (so the negative case means something)', () => {
    expect(new X509Certificate(certPem).subject).toContain('Acme');
  });
});
