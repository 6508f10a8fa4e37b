import { z } from 'zod';
import { NameSchema } from '../../../core/domain/index.ts';
import { ErrorBodySchema } from '../../../core/errors/index.ts';
import { FeatureSchema } from '../../features/features.ts';
import type { TenantFeatures } from '../../features/tenant-features.ts';
import type { Readers } from '../../storage/storage.ts';
import { tenantConfig, TenantConfigSchema } from '../../tenants/tenant-config.ts';
import type { RouteTable } from '../route.ts';

const FeatureParams = z.object({ name: NameSchema });
const FeatureSwitchSchema = z.strictObject({ enabled: z.boolean() });

/** The guides' configuration paths (spec 4.4): any valid credential may read them. */
export function guideConfigRoutes(
  routes: RouteTable,
  deps: { read: Readers; publicConfig: Record<string, unknown>; features: TenantFeatures },
): void {
  routes.add({
    method: 'GET',
    path: '/api/v1/config',
    operationId: 'guideConfig',
    tag: 'guide',
    access: 'authenticated',
    summary: "The caller's tenant and credential, and the service settings a tenant may see",
    responses: { 200: { description: 'configuration', schema: TenantConfigSchema } },
    handler: async ({ caller }) => ({ status: 200, body: await tenantConfig(deps.read, caller, deps.publicConfig) }),
  });
  routes.add({
    method: 'GET',
    path: '/api/v1/features',
    operationId: 'guideListFeatures',
    tag: 'guide',
    access: 'authenticated',
    summary: "The optional capabilities and whether each is on for the caller's tenant",
    responses: { 200: { description: 'features', schema: z.object({ features: z.array(FeatureSchema) }) } },
    handler: async ({ caller }) => ({ status: 200, body: { features: await deps.features.list(caller.tenant) } }),
  });
  routes.add({
    method: 'GET',
    path: '/api/v1/features/{name}',
    operationId: 'guideGetFeature',
    tag: 'guide',
    access: 'authenticated',
    summary: 'One capability and whether it is on',
    params: FeatureParams,
    responses: {
      200: { description: 'the feature', schema: FeatureSchema },
      404: { description: 'no such feature (SVC-SYS-9006)', schema: ErrorBodySchema },
    },
    handler: async ({ caller, params }) => ({ status: 200, body: await deps.features.get(caller.tenant, params.name) }),
  });
  routes.add({
    method: 'PATCH',
    path: '/api/v1/features/{name}',
    operationId: 'guideSwitchFeature',
    tag: 'guide',
    access: 'admin',
    summary: "Switch a feature off or on again for the caller's tenant",
    params: FeatureParams,
    body: FeatureSwitchSchema,
    responses: {
      200: { description: 'the feature as the tenant now has it', schema: FeatureSchema },
      404: { description: 'no such feature (SVC-SYS-9006)', schema: ErrorBodySchema },
      501: {
        description: "the service's configuration decides this feature (SVC-SYS-9011)",
        schema: ErrorBodySchema,
      },
    },
    handler: async ({ caller, params, body }) => ({
      status: 200,
      body: await deps.features.switch(caller, params.name, body.enabled),
    }),
  });
}
