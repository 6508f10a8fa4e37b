import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { admissionResponse, AdmissionReviewSchema, PodSchema, type AdmissionReview } from './admission-review.ts';
import { decide, decideUpdate } from './decide.ts';
import type { InjectionTemplate } from './injection-template.ts';
import { injectionPatch } from './sidecar-patch.ts';

/** An AdmissionReview of a pod is far below this; etcd refuses objects above 1.5 MiB anyway. */
const MAX_BODY_BYTES = 4 * 1024 * 1024;

export interface InjectionWebhookOptions {
  host: string;
  port: number;
  certFile: string;
  keyFile: string;
  template: InjectionTemplate;
  logger: Logger;
  /** How often the certificate files are checked for a rotation (cert-manager renews them in place). */
  certificateCheckMs?: number;
}

class BodyTooLarge extends Error {}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    // Past the bound the rest is read and dropped (the request timeout bounds how long), so that
    // the client gets its 413 instead of a reset connection.
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY_BYTES) chunks.push(chunk);
    });
    req.on('end', () => (size > MAX_BODY_BYTES ? reject(new BodyTooLarge()) : resolve(Buffer.concat(chunks))));
    req.on('error', reject);
  });
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/**
 * The mutating admission webhook: `POST /mutate` answers each AdmissionReview with the sidecar
 * patch, a skip, or a refusal; `GET /healthz` is its probe. Every answer is computed in memory
 * from the pod and the template, so it comes well within the API server's timeout.
 */
export class InjectionWebhook {
  readonly server: Server;
  readonly #options: InjectionWebhookOptions;
  #certificate: { cert: string; key: string };
  #timer: NodeJS.Timeout | undefined;

  constructor(options: InjectionWebhookOptions) {
    this.#options = options;
    this.#certificate = this.#readCertificate();
    this.server = createServer({ ...this.#certificate, minVersion: 'TLSv1.2' }, (req, res) => {
      this.#serve(req, res).catch((error: unknown) => {
        options.logger.error({ err: (error as Error).message }, 'admission request failed');
        if (!res.headersSent) send(res, 500, { error: 'internal error' });
        else res.destroy();
      });
    });
    this.server.requestTimeout = 10_000;
    this.server.headersTimeout = 5_000;
  }

  #readCertificate(): { cert: string; key: string } {
    return {
      cert: readFileSync(this.#options.certFile, 'utf8'),
      key: readFileSync(this.#options.keyFile, 'utf8'),
    };
  }

  /** Loads the certificate again when its files changed; a half-written pair is retried next time. */
  reloadCertificate(): boolean {
    let next: { cert: string; key: string };
    try {
      next = this.#readCertificate();
    } catch (error) {
      this.#options.logger.warn(
        { err: (error as Error).message },
        'serving certificate not readable, keeping the current one',
      );
      return false;
    }
    if (next.cert === this.#certificate.cert && next.key === this.#certificate.key) return false;
    try {
      this.server.setSecureContext({ ...next, minVersion: 'TLSv1.2' });
    } catch (error) {
      this.#options.logger.warn(
        { err: (error as Error).message },
        'serving certificate invalid, keeping the current one',
      );
      return false;
    }
    this.#certificate = next;
    this.#options.logger.info('serving certificate reloaded');
    return true;
  }

  async listen(): Promise<AddressInfo> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.#options.port, this.#options.host, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    this.#timer = setInterval(() => this.reloadCertificate(), this.#options.certificateCheckMs ?? 60_000);
    this.#timer.unref();
    return this.server.address() as AddressInfo;
  }

  async close(): Promise<void> {
    clearInterval(this.#timer);
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeIdleConnections();
    await closed;
  }

  async #serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/healthz' && req.method === 'GET') return send(res, 200, { status: 'ok' });
    if (path !== '/mutate') return send(res, 404, { error: `not found: ${path}` });
    if (req.method !== 'POST') return send(res, 405, { error: 'method not allowed' });
    let body: Buffer;
    try {
      body = await readBody(req);
    } catch (error) {
      if (error instanceof BodyTooLarge) return send(res, 413, { error: 'AdmissionReview too large' });
      throw error;
    }
    let json: unknown;
    try {
      json = JSON.parse(body.toString('utf8'));
    } catch {
      return send(res, 400, { error: 'body is not JSON' });
    }
    const review = AdmissionReviewSchema.safeParse(json);
    if (!review.success) {
      const fields = review.error.issues.map((i) => i.path.join('.') || '(root)').join(', ');
      return send(res, 400, { error: `not an admission.k8s.io/v1 AdmissionReview: ${fields}` });
    }
    send(res, 200, this.#review(review.data.request));
  }

  #review(request: AdmissionReview['request']): Record<string, unknown> {
    const { logger, template } = this.#options;
    const namespace = request.namespace ?? '';
    const entry = {
      uid: request.uid,
      namespace,
      operation: request.operation,
      ...(request.subResource !== undefined ? { sub_resource: request.subResource } : {}),
    };
    if (request.kind.kind !== 'Pod' || (request.operation !== 'CREATE' && request.operation !== 'UPDATE')) {
      logger.info({ ...entry, decision: 'skip', reason: 'not a pod creation or update' }, 'admission');
      return admissionResponse(request.uid, { allowed: true });
    }
    const pod = PodSchema.safeParse(request.object);
    const previous = request.operation === 'UPDATE' ? PodSchema.safeParse(request.oldObject) : undefined;
    if (!pod.success || previous?.success === false) {
      // A pod this webhook cannot read is never let through ungoverned in a governed namespace.
      const issues = [...(pod.error?.issues ?? []), ...(previous?.error?.issues ?? [])];
      const reason = `agent-governance cannot read the pod: ${issues.map((i) => i.path.join('.')).join(', ')}`;
      logger.warn({ ...entry, decision: 'deny', reason }, 'admission');
      return admissionResponse(request.uid, { allowed: false, message: reason });
    }
    const name = pod.data.metadata.name ?? pod.data.metadata.generateName ?? '';
    const decision =
      previous?.data !== undefined
        ? decideUpdate(pod.data, previous.data, namespace, template)
        : decide(pod.data, namespace, template);
    if (decision.action === 'skip') {
      logger.info({ ...entry, pod: name, decision: 'skip', reason: decision.reason }, 'admission');
      return admissionResponse(request.uid, { allowed: true });
    }
    if (decision.action === 'deny') {
      logger.warn({ ...entry, pod: name, decision: 'deny', reason: decision.reason }, 'admission');
      return admissionResponse(request.uid, { allowed: false, message: decision.reason });
    }
    const patch = injectionPatch(pod.data, template, decision.binding);
    logger.info(
      {
        ...entry,
        pod: name,
        decision: 'inject',
        tenant_id: decision.binding.tenant,
        budget_id: decision.binding.budget,
        native_sidecar: template.sidecar.native,
      },
      'admission',
    );
    return admissionResponse(request.uid, { allowed: true, patch });
  }
}
