import { z } from 'zod';

const EnvVarSchema = z.looseObject({ name: z.string() });
const VolumeMountSchema = z.looseObject({ name: z.string(), mountPath: z.string() });
const ContainerSchema = z.looseObject({
  name: z.string(),
  image: z.string().optional(),
  env: z.array(EnvVarSchema).optional(),
  volumeMounts: z.array(VolumeMountSchema).optional(),
  restartPolicy: z.string().optional(),
});
export type Container = z.infer<typeof ContainerSchema>;

/** The parts of a Pod the webhook reads; everything else passes through untouched. */
export const PodSchema = z.looseObject({
  metadata: z
    .looseObject({
      name: z.string().optional(),
      generateName: z.string().optional(),
      namespace: z.string().optional(),
      labels: z.record(z.string(), z.string()).optional(),
      annotations: z.record(z.string(), z.string()).optional(),
    })
    .default({}),
  spec: z.looseObject({
    containers: z.array(ContainerSchema).min(1),
    initContainers: z.array(ContainerSchema).optional(),
    volumes: z.array(z.looseObject({ name: z.string() })).optional(),
    hostNetwork: z.boolean().optional(),
  }),
});
export type Pod = z.infer<typeof PodSchema>;

/** An `admission.k8s.io/v1` AdmissionReview request as the API server sends it. */
export const AdmissionReviewSchema = z.looseObject({
  apiVersion: z.literal('admission.k8s.io/v1'),
  kind: z.literal('AdmissionReview'),
  request: z.looseObject({
    uid: z.string().min(1),
    kind: z.looseObject({ group: z.string(), version: z.string(), kind: z.string() }),
    namespace: z.string().optional(),
    operation: z.string(),
    dryRun: z.boolean().optional(),
    object: z.unknown(),
  }),
});
export type AdmissionReview = z.infer<typeof AdmissionReviewSchema>;

export interface JsonPatchOperation {
  op: 'add' | 'replace' | 'remove';
  path: string;
  value?: unknown;
}

/** The answer: allowed with an optional JSON Patch, or refused with a message the user sees. */
export function admissionResponse(
  uid: string,
  outcome: { allowed: true; patch?: JsonPatchOperation[] } | { allowed: false; message: string },
): Record<string, unknown> {
  const response: Record<string, unknown> = { uid, allowed: outcome.allowed };
  if (!outcome.allowed) response.status = { code: 403, reason: 'Forbidden', message: outcome.message };
  else if (outcome.patch !== undefined && outcome.patch.length > 0) {
    response.patchType = 'JSONPatch';
    response.patch = Buffer.from(JSON.stringify(outcome.patch)).toString('base64');
  }
  return { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response };
}

/** RFC 6901 escaping of one path segment (annotation keys carry `/`). */
export function pointerSegment(segment: string): string {
  return segment.replaceAll('~', '~0').replaceAll('/', '~1');
}
