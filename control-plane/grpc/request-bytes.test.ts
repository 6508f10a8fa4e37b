import { describe, expect, it } from 'vitest';
import { createRequestBytes } from './request-bytes.ts';

const PATH = '/grpc.health.v1.Health/Check';

describe('the share of request bytes one client may hold', () => {
  const bytes = () =>
    createRequestBytes({ limits: new Map(), totalBytes: 1_000_000, maxMessageBytes: 65_536, perAddressBytes: 100 });

  it('counts the addresses of one IPv6 /64 as one client, and another /64 apart', () => {
    const requests = bytes();
    requests.open(PATH, '2001:db8:1:2::1').arriving(60);
    expect(() => requests.open(PATH, '2001:db8:1:2:ffff::9').arriving(60)).toThrow(
      expect.objectContaining({ code: 'SVC-SYS-9005' }),
    );
    expect(() => requests.open(PATH, '2001:db8:1:3::1').arriving(60)).not.toThrow();
  });

  it('counts an IPv4 address written as IPv6 as the IPv4 one', () => {
    const requests = bytes();
    requests.open(PATH, '192.0.2.7').arriving(60);
    expect(() => requests.open(PATH, '::ffff:192.0.2.7').arriving(60)).toThrow(
      expect.objectContaining({ code: 'SVC-SYS-9005' }),
    );
  });

  it('gives a client its share back once its calls end', () => {
    const requests = bytes();
    const first = requests.open(PATH, '2001:db8:1:2::1');
    first.arriving(60);
    first.release();
    expect(() => requests.open(PATH, '2001:db8:1:2::2').arriving(100)).not.toThrow();
  });
});
