export * from './model.ts';
export * from './result.ts';
export * from './semantic-judge.ts';
export * from './compile-policy.ts';
export * from './engine.ts';
export * from './rest.ts';
export * from './approvals.ts';
export * from './revise-policy.ts';
