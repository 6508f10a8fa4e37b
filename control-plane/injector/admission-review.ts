import { z } from 'zod';

/** A reference to a Secret by name, wherever a pod may hold one. */
const SecretRefSchema = z.looseObject({ name: z.string().optional() });
const EnvVarSchema = z.looseObject({
  name: z.string(),
  valueFrom: z.looseObject({ secretKeyRef: SecretRefSchema.optional() }).optional(),
});
const VolumeMountSchema = z.looseObject({
  name: z.string(),
  mountPath: z.string(),
  readOnly: z.boolean().optional(),
});
const ContainerSchema = z.looseObject({
  name: z.string(),
  image: z.string().optional(),
  env: z.array(EnvVarSchema).optional(),
  envFrom: z.array(z.looseObject({ secretRef: SecretRefSchema.optional() })).optional(),
  volumeMounts: z.array(VolumeMountSchema).optional(),
  restartPolicy: z.string().optional(),
  /** An ephemeral container's: the container whose process namespace it joins. */
  targetContainerName: z.string().optional(),
});
export type Container = z.infer<typeof ContainerSchema>;

const VolumeSchema = z.looseObject({
  name: z.string(),
  secret: z.looseObject({ secretName: z.string().optional() }).optional(),
  projected: z
    .looseObject({ sources: z.array(z.looseObject({ secret: SecretRefSchema.optional() })).optional() })
    .optional(),
});
export type Volume = z.infer<typeof VolumeSchema>;

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
    ephemeralContainers: z.array(ContainerSchema).optional(),
    volumes: z.array(VolumeSchema).optional(),
    hostNetwork: z.boolean().optional(),
    hostPID: z.boolean().optional(),
    shareProcessNamespace: z.boolean().optional(),
    hostAliases: z.array(z.unknown()).optional(),
    dnsPolicy: z.string().optional(),
    dnsConfig: z.unknown().optional(),
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
    /** `ephemeralcontainers` for `kubectl debug`, which sends the whole pod. */
    subResource: z.string().optional(),
    dryRun: z.boolean().optional(),
    object: z.unknown(),
    /** The pod before an UPDATE. */
    oldObject: z.unknown().optional(),
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
