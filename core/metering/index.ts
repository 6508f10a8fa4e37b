export * from './prices.ts';
export * from './tokens.ts';
