import { z } from 'zod';
import { MAX_METADATA_DEPTH } from './bounds.ts';
import { nestsWithin } from './json-values.ts';

export const UuidSchema = z.uuid();
/**
 * Free-form JSON. Its nesting is bounded: storage encodes values recursively, and a payload nested
 * thousands deep would overflow the stack there, failing the write it came with.
 */
export const MetadataSchema = z
  .record(z.string(), z.unknown())
  .refine((value) => nestsWithin(value, MAX_METADATA_DEPTH), `must nest at most ${MAX_METADATA_DEPTH} levels deep`);

/** A free-form JSON value (a condition's value, a tool's arguments), its nesting bounded as metadata's is. */
export const JsonValueSchema = z
  .unknown()
  .refine((value) => nestsWithin(value, MAX_METADATA_DEPTH), `must nest at most ${MAX_METADATA_DEPTH} levels deep`);

/** Money is kept in integer micro-dollars so that sums stay exact; surfaces show USD numbers. */
export const MICROS_PER_USD = 1_000_000;

export function usdToMicros(usd: number): number {
  return Math.round(usd * MICROS_PER_USD);
}

/**
 * What a call that cost `micros` (exact, possibly fractional) is charged in the store's whole
 * micro-dollars: the nearest, but at least one when it cost anything. Rounded to the nearest
 * alone, a call under half a micro-dollar (a short embedding, a few tokens of a small model)
 * would count for nothing, and any number of them would never reach an envelope's cost limit.
 */
export function chargedMicros(micros: number): number {
  const rounded = Math.round(micros);
  return rounded === 0 && micros > 0 ? 1 : rounded;
}

export function microsToUsd(micros: number): number {
  return micros / MICROS_PER_USD;
}

/** Page size rules of spec 8: default 20, maximum 100. */
export const PageSizeSchema = z.coerce.number().int().min(1).max(100).default(20);
