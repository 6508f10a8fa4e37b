import { afterAll, beforeAll, describe } from 'vitest';
import { PostgresStorage } from '../../control-plane/storage/postgres/postgres-storage.ts';
import { createTestDatabase, postgresReachable, truncateAll, type TestDatabase } from '../harness/postgres.ts';
import { storageContract } from './repositories.contract.ts';

const available = await postgresReachable();

describe.skipIf(!available)('PostgreSQL', () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(async () => {
    await database?.drop();
  });

  storageContract('PostgreSQL', async () => {
    const { storage } = await PostgresStorage.open({ connectionString: database.url, poolSize: 4 });
    await truncateAll(database.url);
    return { storage, dispose: () => storage.close() };
  });
});
