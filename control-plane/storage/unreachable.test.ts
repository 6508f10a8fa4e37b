import { describe, expect, it } from 'vitest';
import { asGrpcSvcError } from '../grpc/grpc-error.ts';
import { asSvcError } from '../rest/render-error.ts';
import { isStorageUnreachable } from './unreachable.ts';

const coded = (code: string, message = 'failed') => Object.assign(new Error(message), { code });

describe('a storage failure of reach, not of request', () => {
  const unreachable = [
    coded('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:5432'),
    coded('ECONNRESET'),
    coded('ETIMEDOUT'),
    coded('08006', 'connection failure'),
    coded('57P01', 'terminating connection due to administrator command'),
    coded('57P03', 'the database system is starting up'),
    new Error('Connection terminated unexpectedly'),
    new Error('timeout exceeded when trying to connect'),
  ];
  const refused = [
    coded('23505', 'duplicate key value violates unique constraint'),
    coded('40001', 'could not serialize access'),
    coded('22P02', 'invalid input syntax'),
    new Error('something else'),
    'a string',
    null,
  ];

  it('is told apart from a failure of what was asked', () => {
    for (const error of unreachable) expect(isStorageUnreachable(error), String(error)).toBe(true);
    for (const error of refused) expect(isStorageUnreachable(error), String(error)).toBe(false);
  });

  it('answers SVC-SYS-9001 on REST, MCP and gRPC alike, without the driver words', () => {
    for (const error of unreachable) {
      for (const svc of [asSvcError(error), asGrpcSvcError(error)]) {
        expect(svc.code).toBe('SVC-SYS-9001');
        expect(svc.message).not.toContain('127.0.0.1');
        expect(svc.details.retry_after_seconds).toBeGreaterThan(0);
      }
    }
    for (const error of refused) {
      expect(asSvcError(error).code).toBe('SVC-SYS-9007');
      expect(asGrpcSvcError(error).code).toBe('SVC-SYS-9007');
    }
  });
});
