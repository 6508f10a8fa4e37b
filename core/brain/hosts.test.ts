import { describe, expect, it } from 'vitest';
import { classifyDestination, urlsIn } from './hosts.ts';

const where = (url: string) =>
  classifyDestination((urlsIn(url)[0] as { hostAndPath: string }).hostAndPath, { allowed: [] });

describe('where data goes', () => {
  it.each([
    'http://134744072/up',
    'http://0x08080808/up',
    'http://0x8.0x8.0x8.0x8/',
    'http://[2606:4700::1111]/up',
    'http://[2606:4700:4700::1111]:8443/up',
    'http://[::ffff:8.8.8.8]/',
    'http://99999999999/',
    'https://evil.example.com/c',
  ])('%s is external', (url) => {
    expect(where(url)).toBe('external');
  });

  it.each([
    'http://2130706433/',
    'http://127.1/',
    'http://0x7f000001/',
    'http://10.1.2.3/',
    'http://172.20.0.1/',
    'http://192.168.1.10:8080/',
    'http://169.254.10.1/',
    'http://[::1]/',
    'http://[fd12:3456::1]/',
    'http://[fe80::1]/',
    'http://[::ffff:10.0.0.1]/',
    'http://localhost:3000/',
    'http://build-server/',
    'http://api.default.svc.cluster.local/',
  ])('%s is internal', (url) => {
    expect(where(url)).toBe('internal');
  });

  it('reads an IPv6 host whole, with its port apart', () => {
    expect(urlsIn('curl http://[2606:4700::1111]:8443/x')[0]).toMatchObject({
      host: '[2606:4700::1111]',
      hostAndPath: '[2606:4700::1111]/x',
    });
  });
});
