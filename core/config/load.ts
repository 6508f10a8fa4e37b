import { readFileSync } from 'node:fs';
import { SvcError } from '../errors/index.ts';
import { CONFIG_KEYS, ConfigSchema, envName, type Config } from './schema.ts';

/**
 * Builds the configuration from an optional JSON file (SVC_CONFIG_FILE) and SVC_* variables.
 * A bad value throws SVC-SYS-9002 whose message names the environment variable or file key,
 * so start-up stops with a message an operator can act on.
 */
export function loadConfig(
  env: NodeJS.ProcessEnv = process.env,
  overrides: Partial<Record<keyof Config, unknown>> = {},
): Config {
  const fileValues = env.SVC_CONFIG_FILE ? readConfigFile(env.SVC_CONFIG_FILE) : {};
  const merged: Record<string, unknown> = { ...fileValues };
  for (const key of CONFIG_KEYS) {
    const value = env[envName(key)];
    if (value !== undefined && value !== '') merged[key] = value;
  }
  Object.assign(merged, overrides);
  const result = ConfigSchema.strict().safeParse(merged);
  if (result.success) return result.data;
  const violations = result.error.issues.map((issue) => {
    const key = String(issue.path[0] ?? '');
    if (key === '') return { field: 'SVC_CONFIG_FILE', description: issue.message };
    const source =
      key in fileValues && env[envName(key as keyof Config)] === undefined
        ? `${key} (config file)`
        : envName(key as keyof Config);
    return { field: source, description: issue.message };
  });
  throw new SvcError(
    'SVC-SYS-9002',
    `invalid configuration: ${violations.map((v) => `${v.field}: ${v.description}`).join('; ')}`,
    {},
    violations,
  );
}

function readConfigFile(path: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new SvcError(
      'SVC-SYS-9002',
      `invalid configuration: SVC_CONFIG_FILE ${path}: ${(error as Error).message}`,
      {},
      [{ field: 'SVC_CONFIG_FILE', description: (error as Error).message }],
    );
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new SvcError('SVC-SYS-9002', `invalid configuration: SVC_CONFIG_FILE ${path} must hold a JSON object`, {}, [
      { field: 'SVC_CONFIG_FILE', description: 'must hold a JSON object' },
    ]);
  }
  return parsed as Record<string, unknown>;
}
