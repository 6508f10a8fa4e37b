export * from './catalogue.ts';
export * from './svc-error.ts';
export * from './validation.ts';
export * from './bodies.ts';
export * from './documentation.ts';
export * from './as-error.ts';
