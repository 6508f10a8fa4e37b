export { writeInBackground, type StoreLogger } from './background-write.ts';
export { openProxyStore, type ProxyStore } from './open-store.ts';
export { ProvisionalEvents } from './provisional-events.ts';
