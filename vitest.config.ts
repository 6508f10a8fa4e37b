import { availableParallelism } from 'node:os';
import { configDefaults, defineConfig, type TestProjectInlineConfiguration } from 'vitest/config';

const EVERY_SUITE = [
  'core/**/*.test.ts',
  'proxy/**/*.test.ts',
  'control-plane/**/*.test.ts',
  'standalone/**/*.test.ts',
  'test/**/*.test.ts',
];

/** The suites that start a control plane, run once more on PostgreSQL (docs/storage.md). */
const ON_POSTGRES = [
  'test/control-plane/**/*.test.ts',
  'test/fleet/**/*.test.ts',
  'test/standalone/**/*.test.ts',
  'test/proxy/**/*.test.ts',
  'test/nats/control-plane-outbox.test.ts',
  'test/nats/auth-failures-across-replicas.test.ts',
  'test/nats/request-rate-across-replicas.test.ts',
  'test/nats/poison-messages.test.ts',
  'test/injector/injected-pod.test.ts',
  'test/observability/no-secrets-in-logs.test.ts',
  'control-plane/processor/event-processor.test.ts',
];
/**
 * Suites about the LMDB store, or about a proxy that runs without a control plane, which a
 * PostgreSQL control plane changes nothing in.
 */
const NOT_ON_POSTGRES = [
  'test/control-plane/storage-failure.test.ts',
  'test/proxy/ca-in-place.test.ts',
  'test/proxy/resilience.test.ts',
  'test/proxy/memory.test.ts',
  'test/proxy/start-footprint.test.ts',
];

/** Suites that run on PostgreSQL whatever the storage under test: run once, with the PostgreSQL suites. */
const ONLY_ON_POSTGRES = ['test/fleet/replicas.test.ts'];

/**
 * Suites that start whole fleets of processes or drive load to measure memory: each has the
 * machine to itself, after the rest, so that their waits hold on a small CI machine.
 */
const ALONE = ['test/fleet/**/*.test.ts', 'test/proxy/memory.test.ts'];

/**
 * Files run at once beside each other: half as many again as there are cores. A suite spends about
 * half its time waiting on sockets, timers and the processes it starts, so with one file per core
 * the machine sat half idle (on 2 cores, 3 at a time took the LMDB suites from 223 s to 180 s and
 * the PostgreSQL ones from 145 s to 119 s).
 */
const FILES_AT_ONCE = Math.ceil(availableParallelism() * 1.5);

/**
 * Two projects per storage: the suites that share the machine, every file in a process of its own
 * and `FILES_AT_ONCE` at a time, then the suites that run alone, one after the other.
 */
function onStorage(
  storage: 'lmdb' | 'postgres',
  suites: { include: string[]; exclude: string[] },
  order: number,
): TestProjectInlineConfiguration[] {
  const env = { SVC_TEST_STORAGE: storage };
  return [
    {
      extends: true,
      test: {
        name: storage,
        include: suites.include,
        exclude: [...configDefaults.exclude, ...suites.exclude, ...ALONE],
        env,
        maxWorkers: FILES_AT_ONCE,
        sequence: { groupOrder: order },
      },
    },
    {
      extends: true,
      test: {
        name: `${storage}-alone`,
        include: ALONE,
        exclude: [...configDefaults.exclude, ...suites.exclude],
        env,
        fileParallelism: false,
        sequence: { groupOrder: order + 1 },
      },
    },
  ];
}

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    reporters: ['default', './test/reporters/summary-line.ts'],
    projects: [
      ...onStorage('lmdb', { include: EVERY_SUITE, exclude: ONLY_ON_POSTGRES }, 0),
      ...onStorage('postgres', { include: ON_POSTGRES, exclude: NOT_ON_POSTGRES }, 2),
    ],
  },
});
