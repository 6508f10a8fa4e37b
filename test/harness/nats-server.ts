import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { freePort } from './free-port.ts';

export interface NatsServerOptions {
  /** A nats-server configuration file (accounts, users, permissions). */
  configFile?: string;
  /** JetStream store directory; a fresh temporary one when absent (removed by `dispose`). */
  storeDir?: string;
  /** How long to wait for the server to accept connections. */
  startTimeoutMs?: number;
}

export interface NatsServer {
  readonly port: number;
  readonly url: string;
  readonly storeDir: string;
  /** SIGTERM and wait for the exit. */
  stop(): Promise<void>;
  /** SIGKILL (a crash) and wait for the exit. */
  kill(): Promise<void>;
  /** Starts again on the same port and store directory, so JetStream state survives. */
  restart(): Promise<void>;
  /** Stops the server and removes a store directory it created. */
  dispose(): Promise<void>;
}

function findBinary(): string {
  const candidates = [
    ...(process.env.PATH ?? '')
      .split(delimiter)
      .filter(Boolean)
      .map((dir) => join(dir, 'nats-server')),
    '/usr/sbin/nats-server',
  ];
  for (const candidate of candidates) {
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here; try the next directory
    }
  }
  throw new Error('nats-server not found on PATH or at /usr/sbin/nats-server');
}

function waitForExit(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

/** Spawns the server and resolves once it logged that it is ready (JetStream included). */
function launch(binary: string, args: string[], timeoutMs: number): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`nats-server did not start within ${timeoutMs} ms:\n${log}`));
    }, timeoutMs);
    const onData = (chunk: Buffer): void => {
      log += chunk.toString();
      if (log.includes('Server is ready')) {
        clearTimeout(timer);
        child.stderr?.off('data', onData);
        // Keep draining stderr so the server never blocks on a full pipe.
        child.stderr?.resume();
        resolve(child);
      }
    };
    child.stderr?.on('data', onData);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`nats-server exited (${code ?? signal}) before it was ready:\n${log}`));
    });
  });
}

/** Starts a real nats-server with JetStream on a free port, for tests. */
export async function startNatsServer(options: NatsServerOptions = {}): Promise<NatsServer> {
  const binary = findBinary();
  const port = await freePort();
  const ownsStore = options.storeDir === undefined;
  const storeDir = options.storeDir ?? (await mkdtemp(join(tmpdir(), 'svc-nats-')));
  const args = [
    ...(options.configFile ? ['-c', options.configFile] : []),
    '-a',
    '127.0.0.1',
    '-p',
    String(port),
    '-js',
    '-sd',
    storeDir,
  ];
  const timeoutMs = options.startTimeoutMs ?? 10_000;
  let child: ChildProcess | undefined = await launch(binary, args, timeoutMs).catch(async (error: unknown) => {
    if (ownsStore) await rm(storeDir, { recursive: true, force: true });
    throw error;
  });
  // A test run that dies without dispose() must not leave a server behind.
  const killOnExit = (): void => void child?.kill('SIGKILL');
  process.once('exit', killOnExit);

  async function end(signal: NodeJS.Signals): Promise<void> {
    const running = child;
    child = undefined;
    if (!running) return;
    const exited = waitForExit(running);
    running.kill(signal);
    await exited;
  }

  return {
    port,
    url: `nats://127.0.0.1:${port}`,
    storeDir,
    stop: () => end('SIGTERM'),
    kill: () => end('SIGKILL'),
    async restart() {
      await end('SIGTERM');
      child = await launch(binary, args, timeoutMs);
    },
    async dispose() {
      process.off('exit', killOnExit);
      await end('SIGTERM');
      if (ownsStore) await rm(storeDir, { recursive: true, force: true });
    },
  };
}
