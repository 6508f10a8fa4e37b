import { SvcError } from '../errors/index.ts';

/** A setting that is optional in the schema but needed by this process; refused naming it when unset. */
export function requiredSetting(value: string | undefined, variable: string, processName: string): string {
  if (value !== undefined) return value;
  throw new SvcError('SVC-SYS-9002', `invalid configuration: ${variable}: required for the ${processName}`, {}, [
    { field: variable, description: `required for the ${processName}` },
  ]);
}
