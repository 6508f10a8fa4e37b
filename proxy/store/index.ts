export { openProxyStore, type ProxyStore } from './open-store.ts';
