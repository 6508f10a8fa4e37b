export * from './builtin-judge.ts';
export * from './judge-request.ts';
