import { afterAll, beforeAll } from 'vitest';
import { loadPriceTable } from '../../core/metering/prices.ts';
import { createTokenCounter, type TokenCounter } from '../../core/metering/tokens.ts';
import type { AdapterDeps } from '../../proxy/providers/adapter.ts';
import { createAdapterDeps } from '../../proxy/providers/registry.ts';
import { startSimulator, type Simulator } from './server.ts';

export interface AdapterFixture {
  readonly tokens: TokenCounter;
  readonly deps: AdapterDeps;
  /** The simulator of this test file, started before its tests and closed after them. */
  readonly sim: Simulator;
}

/** Registers the hooks of a provider-adapter test file: one token counter, one simulator. */
export function useAdapterFixture(): AdapterFixture {
  const tokens = createTokenCounter();
  const deps = createAdapterDeps(tokens, loadPriceTable());
  let sim: Simulator | undefined;
  beforeAll(async () => {
    sim = await startSimulator();
  });
  afterAll(async () => {
    await sim?.close();
    tokens.free();
  });
  return {
    tokens,
    deps,
    get sim(): Simulator {
      if (sim === undefined) throw new Error('the simulator starts in beforeAll');
      return sim;
    },
  };
}

export const decodeText = (bytes: Uint8Array): string => new TextDecoder().decode(bytes);
