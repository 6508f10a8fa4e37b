import { z } from 'zod';

export const UuidSchema = z.uuid();
export const TimestampSchema = z.iso.datetime({ offset: true });
export const MetadataSchema = z.record(z.string(), z.unknown());

/** Money is kept in integer micro-dollars so that sums stay exact; surfaces show USD numbers. */
export const MICROS_PER_USD = 1_000_000;

export function usdToMicros(usd: number): number {
  return Math.round(usd * MICROS_PER_USD);
}

export function microsToUsd(micros: number): number {
  return micros / MICROS_PER_USD;
}

/** Page size rules of spec 8: default 20, maximum 100. */
export const PageSizeSchema = z.coerce.number().int().min(1).max(100).default(20);
