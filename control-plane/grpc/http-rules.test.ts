import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadSync } from '@grpc/proto-loader';
import { afterAll, describe, expect, it } from 'vitest';
import { isSvcError } from '../../core/errors/index.ts';
import { LOADER_OPTIONS } from './contracts.ts';
import { listHttpRules } from './http-rules.ts';

const root = mkdtempSync(join(tmpdir(), 'http-rules-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Loads one service `T` in package `t.v1` whose methods are given as proto text. */
function load(name: string, methods: string) {
  mkdirSync(join(root, name, 'v1'), { recursive: true });
  writeFileSync(
    join(root, name, 'v1', 't.proto'),
    `syntax = "proto3";
package ${name}.v1;
import "google/api/annotations.proto";
service TService {
${methods}
}
message Req { string id = 1; Inner inner = 2; }
message Inner { string id = 1; }
message Resp {}
`,
  );
  return loadSync(`${name}/v1/t.proto`, { ...LOADER_OPTIONS, includeDirs: [root, ...LOADER_OPTIONS.includeDirs] });
}

function errorOf(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    return isSvcError(error) ? `${error.code} ${error.message}` : `other ${String(error)}`;
  }
  return 'no error';
}

describe('listHttpRules', () => {
  it('reads verb, path and body, and lists additional bindings as rules of their own', () => {
    const definition = load(
      'bindings',
      `rpc Get(Req) returns (Resp) {
    option (google.api.http) = {
      get: "/v1/things/{id}"
      additional_bindings {post: "/v1/things/{id}:fetch" body: "*"}
      additional_bindings {custom: {kind: "HEAD" path: "/v1/things/{id}"}}
    };
  }
  rpc Put(Req) returns (Resp) {
    option (google.api.http) = {
      patch: "/v1/inner/{inner.id}"
      body: "inner"
      additional_bindings {put: "/v1/inner/{inner.id}" body: "inner"}
    };
  }
  rpc Plain(Req) returns (Resp);`,
    );
    expect(listHttpRules(definition)).toEqual([
      { service: 'bindings.v1.TService', method: 'Get', verb: 'GET', path: '/v1/things/{id}', body: null },
      { service: 'bindings.v1.TService', method: 'Get', verb: 'POST', path: '/v1/things/{id}:fetch', body: '*' },
      { service: 'bindings.v1.TService', method: 'Get', verb: 'HEAD', path: '/v1/things/{id}', body: null },
      { service: 'bindings.v1.TService', method: 'Put', verb: 'PATCH', path: '/v1/inner/{inner.id}', body: 'inner' },
      { service: 'bindings.v1.TService', method: 'Put', verb: 'PUT', path: '/v1/inner/{inner.id}', body: 'inner' },
    ]);
  });

  it('refuses a binding with two verbs, naming the method', () => {
    const definition = load(
      'twoverbs',
      `rpc Both(Req) returns (Resp) {
    option (google.api.http) = {
      get: "/v1/a"
      post: "/v1/b"
    };
  }`,
    );
    expect(errorOf(() => listHttpRules(definition))).toMatch(/^SVC-SYS-9007 twoverbs\.v1\.TService\.Both: .*found 2/);
  });

  it('refuses a path variable that names no request field', () => {
    const definition = load('badvar', `rpc Get(Req) returns (Resp) { option (google.api.http) = {get: "/v1/{ids}"}; }`);
    expect(errorOf(() => listHttpRules(definition))).toMatch(/^SVC-SYS-9007 .*\{ids\} names no request field/);
  });

  it('refuses a body that names no request field', () => {
    const definition = load(
      'badbody',
      `rpc Make(Req) returns (Resp) {
    option (google.api.http) = {
      post: "/v1/things"
      body: "thing"
    };
  }`,
    );
    expect(errorOf(() => listHttpRules(definition))).toMatch(/^SVC-SYS-9007 .*body "thing" names no request field/);
  });

  it('refuses keys it would otherwise drop, such as response_body', () => {
    const definition = load(
      'respbody',
      `rpc Get(Req) returns (Inner) {
    option (google.api.http) = {
      get: "/v1/things/{id}"
      response_body: "id"
    };
  }`,
    );
    expect(errorOf(() => listHttpRules(definition))).toMatch(/^SVC-SYS-9007 .*response_body/);
  });

  it('refuses a path that does not start with a slash', () => {
    const definition = load('relpath', `rpc Get(Req) returns (Resp) { option (google.api.http) = {get: "v1/x"}; }`);
    expect(errorOf(() => listHttpRules(definition))).toMatch(/^SVC-SYS-9007 .*does not start with \//);
  });
});
