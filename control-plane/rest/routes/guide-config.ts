import { z } from 'zod';
import { NameSchema } from '../../../core/domain/index.ts';
import { ErrorBodySchema, SvcError } from '../../../core/errors/index.ts';
import { FeatureSchema, type Feature } from '../../features/features.ts';
import type { Readers } from '../../storage/storage.ts';
import { tenantConfig, TenantConfigSchema } from '../../tenants/tenant-config.ts';
import type { RouteTable } from '../route.ts';

const FeatureParams = z.object({ name: NameSchema });

/** The guides' configuration paths (spec 4.4): any valid credential may read them. */
export function guideConfigRoutes(
  routes: RouteTable,
  deps: { read: Readers; publicConfig: Record<string, unknown>; features: readonly Feature[] },
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
    summary: 'The optional capabilities and whether the configuration switched each on',
    responses: { 200: { description: 'features', schema: z.object({ features: z.array(FeatureSchema) }) } },
    handler: () => ({ status: 200, body: { features: deps.features } }),
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
    handler: ({ params }) => {
      const feature = deps.features.find((f) => f.name === params.name);
      if (feature === undefined)
        throw new SvcError(
          'SVC-SYS-9006',
          `no feature ${params.name}; known: ${deps.features.map((f) => f.name).join(', ')}`,
          { feature: params.name },
        );
      return { status: 200, body: feature };
    },
  });
}
