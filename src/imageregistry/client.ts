/**
 * A client of the OCI distribution API, for pushing (distribution-spec v1.1, "push"): the API
 * check (`GET /v2/`), blobs by digest (`HEAD` first; a missing one uploaded monolithically,
 * `POST /v2/<name>/blobs/uploads/` then `PUT <location>?digest=`) and manifests by tag or
 * digest (`PUT /v2/<name>/manifests/<reference>`). Node's http/https only.
 *
 * Authentication follows the registry's 401 challenge: Basic with the credentials given, or
 * Bearer (Docker's token protocol: a token for `repository:<name>:pull,push` from the realm,
 * asked with the credentials when given). Credentials and tokens go only to the registry's own
 * origin and its realm, never into a message. Failures are ExternalErrors naming the registry,
 * the repository and the HTTP status, with the next step.
 */
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import type { Readable } from 'node:stream';
import { rootCertificates } from 'node:tls';
import { isLoopbackUrl } from '../agent/registration.js';
import { ConfigError, ExternalError, messageOf, requestField } from '../errors.js';
import type { RegistryCredentials } from './auth.js';
import type { RegistryTarget } from './reference.js';

export interface RegistryClientOptions {
  target: RegistryTarget;
  /** From the auth file (`readRegistryAuth`). Default: none (anonymous). */
  credentials?: RegistryCredentials;
  /** PEM file of the CA that signed the registry's certificate, trusted besides the system's. Default: the system's CAs only. */
  caFile?: string;
  signal?: AbortSignal;
  /** Time a request may go without a byte either way. Default 60 s. */
  idleTimeoutMs?: number;
}

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** A request body: bytes, or a stream made anew for each attempt (a retry after a 401 sends it again). */
export type RequestBody = { bytes: Buffer } | { stream: () => Readable; size: number };

/** The most of an answer's body kept (errors, manifests, tokens). */
const maxAnswerBytes = 4 * 1024 * 1024;
const defaultIdleTimeoutMs = 60_000;
const maxRedirects = 3;

export class RegistryClient {
  private readonly target: RegistryTarget;
  private readonly origin: string;
  private readonly credentials: RegistryCredentials | undefined;
  private readonly signal: AbortSignal | undefined;
  private readonly idleTimeoutMs: number;
  private agent: https.Agent | undefined;
  private basic: string | undefined;
  private readonly tokens = new Map<string, string>();

  private constructor(options: RegistryClientOptions, agent: https.Agent | undefined) {
    this.target = options.target;
    this.origin = `${options.target.scheme}://${options.target.host}`;
    this.credentials = options.credentials;
    this.signal = options.signal;
    this.idleTimeoutMs = options.idleTimeoutMs ?? defaultIdleTimeoutMs;
    this.agent = agent;
  }

  /** A client of the target; reads the CA file (a ConfigError names it when it cannot be read). */
  static async open(options: RegistryClientOptions): Promise<RegistryClient> {
    let agent: https.Agent | undefined;
    if (options.target.scheme === 'https') {
      let ca: string[] | undefined;
      if (options.caFile !== undefined) {
        const pem = await readFile(options.caFile, 'utf8').catch((error: unknown) => {
          throw new ConfigError(`The registry CA file ${options.caFile} cannot be read (${messageOf(error)})`, [], { hint: `Give ${requestField('imageRegistryCaFile')} the PEM file of the CA that signed ${options.target.host}'s certificate.` });
        });
        if (!pem.includes('-----BEGIN CERTIFICATE-----')) throw new ConfigError(`The registry CA file ${options.caFile} holds no PEM certificate`, [], { hint: `Give ${requestField('imageRegistryCaFile')} the PEM file of the CA that signed ${options.target.host}'s certificate.` });
        ca = [...rootCertificates, pem];
      }
      agent = new https.Agent({ keepAlive: true, maxSockets: 4, ...(ca ? { ca } : {}) });
    }
    return new RegistryClient(options, agent);
  }

  close(): void {
    this.agent?.destroy();
    this.agent = undefined;
  }

  /** The API check: the registry answers `GET /v2/` (with the credentials, when it asks for them). */
  async check(): Promise<void> {
    const answer = await this.send('GET', '/v2/', { what: 'the API check (GET /v2/)' });
    if (answer.status !== 200) throw this.failure(answer, 'the API check (GET /v2/)');
  }

  /** Whether `repository` has the blob `digest` (`HEAD`: 200 yes, 404 no). */
  async hasBlob(repository: string, digest: string): Promise<boolean> {
    const what = `HEAD of blob ${digest}`;
    const answer = await this.send('HEAD', `/v2/${repository}/blobs/${digest}`, { what, repository });
    if (answer.status === 200) return true;
    if (answer.status === 404) return false;
    throw this.failure(answer, what, repository);
  }

  /** Uploads blob `digest` of `size` bytes into `repository` in one PUT. */
  async pushBlob(repository: string, digest: string, body: RequestBody): Promise<void> {
    const what = `the upload of blob ${digest}`;
    const started = await this.send('POST', `/v2/${repository}/blobs/uploads/`, { what, repository, body: { bytes: Buffer.alloc(0) } });
    const location = headerOf(started, 'location');
    if (started.status !== 202 || location === undefined) throw this.failure(started, `${what} (POST, expected 202 with a Location)`, repository);
    const url = new URL(location, this.origin);
    url.searchParams.set('digest', digest);
    const size = 'bytes' in body ? body.bytes.length : body.size;
    const put = await this.send('PUT', url, { what, repository, body, headers: { 'content-type': 'application/octet-stream', 'content-length': String(size) } });
    if (put.status !== 201) throw this.failure(put, `${what} (PUT, expected 201)`, repository);
  }

  /** Puts a manifest (or index) by `reference` (a tag or its digest); returns the digest the registry reports, if any. */
  async putManifest(repository: string, reference: string, mediaType: string, bytes: Buffer): Promise<string | undefined> {
    const what = `PUT of manifest ${reference}`;
    const answer = await this.send('PUT', `/v2/${repository}/manifests/${reference}`, { what, repository, body: { bytes }, headers: { 'content-type': mediaType, 'content-length': String(bytes.length) } });
    if (answer.status !== 201) throw this.failure(answer, what, repository);
    return headerOf(answer, 'docker-content-digest');
  }

  /** One request, authenticated on the registry's challenge (once), following redirects of HEAD and GET to other origins without credentials. */
  private async send(method: string, where: string | URL, options: { what: string; repository?: string; body?: RequestBody; headers?: Record<string, string> }): Promise<Answer> {
    let url = typeof where === 'string' ? new URL(where, this.origin) : where;
    let challenged = false;
    for (let redirects = 0; ; ) {
      const sameOrigin = url.origin === this.origin;
      const authorization = sameOrigin ? this.authorization(options.repository) : undefined;
      const answer = await this.raw(method, url, { ...(options.headers ?? {}), ...(authorization ? { authorization } : {}) }, options.body, options.what);
      if (answer.status === 401 && sameOrigin && !challenged) {
        challenged = true;
        await this.authenticate(answer, options.what, options.repository);
        continue;
      }
      if (answer.status === 401) throw this.unauthorized(answer, options.what, options.repository, challenged);
      const location = headerOf(answer, 'location');
      if ((method === 'HEAD' || method === 'GET') && [301, 302, 303, 307, 308].includes(answer.status) && location !== undefined && redirects < maxRedirects) {
        redirects++;
        url = new URL(location, url);
        continue;
      }
      return answer;
    }
  }

  private authorization(repository: string | undefined): string | undefined {
    const token = this.tokens.get(repository ?? '');
    return token ? `Bearer ${token}` : this.basic;
  }

  /** Answers a 401's challenge: Basic with the credentials, or a Bearer token from the realm. */
  private async authenticate(answer: Answer, what: string, repository: string | undefined): Promise<void> {
    const challenge = headerOf(answer, 'www-authenticate') ?? '';
    const scheme = /^\s*(\w+)/.exec(challenge)?.[1]?.toLowerCase();
    if (scheme === 'basic') {
      if (!this.credentials) throw this.unauthorized(answer, what, repository, false);
      this.basic = `Basic ${Buffer.from(`${this.credentials.username}:${this.credentials.password}`).toString('base64')}`;
      return;
    }
    if (scheme !== 'bearer') throw this.unauthorized(answer, what, repository, false, `its challenge (${scheme ?? 'none'}) is neither Basic nor Bearer`);
    const params = Object.fromEntries([...challenge.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1]!.toLowerCase(), m[2]!]));
    if (!params.realm) throw this.unauthorized(answer, what, repository, false, 'its Bearer challenge names no realm');
    const realm = new URL(params.realm);
    if (realm.protocol !== 'https:' && !(realm.protocol === 'http:' && isLoopbackUrl(realm.href))) {
      throw this.unauthorized(answer, what, repository, false, `its token realm ${realm.origin} is not HTTPS (plain HTTP only on loopback)`);
    }
    if (params.service) realm.searchParams.set('service', params.service);
    const scope = repository ? `repository:${repository}:pull,push` : params.scope;
    if (scope) realm.searchParams.set('scope', scope);
    const basic = this.credentials ? `Basic ${Buffer.from(`${this.credentials.username}:${this.credentials.password}`).toString('base64')}` : undefined;
    const tokenAnswer = await this.raw('GET', realm, basic ? { authorization: basic } : {}, undefined, `a token from ${realm.origin}`);
    if (tokenAnswer.status !== 200) throw this.unauthorized(tokenAnswer, `a token from ${realm.origin}${realm.pathname}`, repository, this.credentials !== undefined);
    let token: unknown;
    try {
      const parsed = JSON.parse(tokenAnswer.body.toString('utf8')) as { token?: unknown; access_token?: unknown };
      token = parsed.token ?? parsed.access_token;
    } catch {
      token = undefined;
    }
    if (typeof token !== 'string' || token === '') throw this.unauthorized(tokenAnswer, `a token from ${realm.origin}${realm.pathname}`, repository, false, 'its answer holds no token');
    this.tokens.set(repository ?? '', token);
  }

  private unauthorized(answer: Answer, what: string, repository: string | undefined, withCredentials: boolean, why?: string): ExternalError {
    const where = `${this.target.host}${repository ? ` (repository ${repository})` : ''}`;
    const fix = this.credentials
      ? `Check the auths entry for ${this.target.host} in ${requestField('imageRegistryAuthFile')} (docker login ${this.target.host} writes it) and that this user may push there.`
      : `Give ${requestField('imageRegistryAuthFile')} a Docker config.json with an auths entry for ${this.target.host} (docker login ${this.target.host} writes one).`;
    const message = why
      ? `Registry ${where} answered ${answer.status} to ${what} and cannot be authenticated with: ${why}`
      : withCredentials || this.credentials
        ? `Registry ${where} refused the credentials (${answer.status}) for ${what}`
        : `Registry ${where} asks for credentials (${answer.status}) for ${what}, and none were given`;
    return new ExternalError(message, { details: registryErrors(answer), hint: fix });
  }

  private failure(answer: Answer, what: string, repository?: string): ExternalError {
    const where = `${this.target.host}${repository ? ` (repository ${repository})` : ''}`;
    const status = answer.status;
    const hint =
      status === 403
        ? `The registry denies this push: grant the user push rights on ${repository ?? 'the repository'}, or name another path in ${requestField('imageRegistry')}.`
        : status === 404 && what.startsWith('the API check')
          ? `${this.origin} does not serve the OCI distribution API (/v2/): check the host and port in ${requestField('imageRegistry')}.`
          : status >= 500 || status === 429
            ? 'The registry failed or is busy; run the command again (it pushes only what the registry does not have).'
            : `Check that ${this.target.host} is an OCI distribution registry that accepts pushes to ${repository ?? 'this path'}.`;
    return new ExternalError(`Registry ${where} answered ${status} to ${what}`, { details: registryErrors(answer), hint });
  }

  private raw(method: string, url: URL, headers: Record<string, string>, body: RequestBody | undefined, what: string): Promise<Answer> {
    return new Promise<Answer>((resolve, reject) => {
      const secure = url.protocol === 'https:';
      const request = (secure ? https : http).request(url, {
        method,
        headers: { 'user-agent': 'provisioner', ...headers, ...(body === undefined ? {} : { 'content-length': headers['content-length'] ?? String('bytes' in body ? body.bytes.length : body.size) }) },
        ...(secure && this.agent ? { agent: this.agent } : {}),
        ...(this.signal ? { signal: this.signal } : {}),
        timeout: this.idleTimeoutMs,
      }, (response) => {
        const chunks: Buffer[] = [];
        let kept = 0;
        response.on('data', (chunk: Buffer) => {
          if (kept < maxAnswerBytes) {
            chunks.push(chunk);
            kept += chunk.length;
          }
        });
        response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body: Buffer.concat(chunks) }));
        response.on('error', (error) => reject(this.unreachable(error, url, what)));
      });
      request.on('timeout', () => request.destroy(Object.assign(new Error(`no answer for ${Math.round(this.idleTimeoutMs / 1000)} s`), { code: 'ETIMEDOUT' })));
      request.on('error', (error) => reject(this.signal?.aborted ? error : this.unreachable(error, url, what)));
      if (body === undefined) request.end();
      else if ('bytes' in body) request.end(body.bytes);
      else {
        const stream = body.stream();
        stream.on('error', (error) => request.destroy(error));
        stream.pipe(request);
      }
    });
  }

  private unreachable(error: Error, url: URL, what: string): ExternalError {
    const code = (error as NodeJS.ErrnoException).code ?? '';
    const tls = /CERT|SELF_SIGNED|UNABLE_TO_(GET|VERIFY)|ALTNAME/.test(code);
    const plain = code === 'EPROTO' || /wrong version number|packet length too long/i.test(error.message);
    const hint = tls
      ? `${url.host}'s certificate is not trusted: give the CA that signed it with ${requestField('imageRegistryCaFile')} (a PEM file).`
      : plain
        ? `${url.host} does not speak TLS; plain HTTP is used for a loopback registry only, so serve HTTPS there.`
        : `Check that a registry serves ${url.origin} and that this machine reaches it (${requestField('imageRegistry')}).`;
    return new ExternalError(`Registry ${url.host} could not be reached for ${what}: ${messageOf(error)}${code && !messageOf(error).includes(code) ? ` (${code})` : ''}`, { hint, cause: error });
  }
}

function headerOf(answer: Answer, name: string): string | undefined {
  const value = answer.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** The registry's own error lines (`{"errors":[{"code","message"}]}`), for the details. */
function registryErrors(answer: Answer): string[] {
  try {
    const parsed = JSON.parse(answer.body.toString('utf8')) as { errors?: { code?: string; message?: string }[] };
    return (parsed.errors ?? []).map((e) => `${e.code ?? 'ERROR'}: ${e.message ?? ''}`.trim());
  } catch {
    return [];
  }
}
