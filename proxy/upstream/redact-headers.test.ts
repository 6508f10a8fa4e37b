import { describe, expect, it } from 'vitest';
import { redactHeaders } from './redact-headers.ts';

describe('redactHeaders', () => {
  it('hides every credential header whatever its case and keeps the others', () => {
    const out = redactHeaders({
      Authorization: 'Bearer sk-secret',
      'x-api-key': 'sk-ant-secret',
      'api-key': 'azure-secret',
      'x-goog-api-key': 'goog-secret',
      'proxy-authorization': 'Basic c2VjcmV0',
      'content-type': 'application/json',
    });
    expect(JSON.stringify(out)).not.toMatch(/secret|c2VjcmV0/);
    expect(out['content-type']).toBe('application/json');
    expect(out.Authorization).toBe('[redacted]');
  });
});
