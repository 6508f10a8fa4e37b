import { connect, StringCodec } from 'nats';
import { describe, expect, it } from 'vitest';
import { startNatsServer } from './nats-server.ts';

describe('nats-server harness', () => {
  it('starts with JetStream on a free port and keeps JetStream state across kill and restart on the same port', async () => {
    const server = await startNatsServer();
    try {
      expect(server.port).not.toBe(4222);
      let nc = await connect({ servers: server.url });
      const jsm = await nc.jetstreamManager();
      await jsm.streams.add({ name: 'HARNESS', subjects: ['harness.>'] });
      await nc.jetstream().publish('harness.a', StringCodec().encode('kept'));
      await nc.close();

      await server.kill();
      await expect(connect({ servers: server.url, reconnect: false, timeout: 500 })).rejects.toThrow();
      await server.restart();

      nc = await connect({ servers: server.url });
      const stored = await (await nc.jetstreamManager()).streams.getMessage('HARNESS', { seq: 1 });
      expect(StringCodec().decode(stored.data)).toBe('kept');
      await nc.close();
    } finally {
      await server.dispose();
    }
  });

  it('fails clearly when the server cannot start', async () => {
    await expect(startNatsServer({ configFile: '/nonexistent/svc-nats.conf', startTimeoutMs: 3_000 })).rejects.toThrow(
      /nats-server exited/,
    );
  });
});
