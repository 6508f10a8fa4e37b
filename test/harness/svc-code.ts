import { isSvcError } from '../../core/errors/index.ts';

/** How a promise ends: null when it resolves, its SVC code when it rejects with one, else `other`. */
export async function svcCodeOf(promise: Promise<unknown>): Promise<string | null> {
  try {
    await promise;
    return null;
  } catch (error) {
    return isSvcError(error) ? error.code : 'other';
  }
}
