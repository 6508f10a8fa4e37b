export { IdleGc, type IdleGcDeps } from './idle-gc.ts';
