export { passThroughHandler, type PassThroughOptions } from './pass-through.ts';
export type { ListenerMode, ProxiedRequest, ProxyHandler } from './proxied-request.ts';
export { ProxyListener, type ListenerLogger, type ProxyListenerOptions } from './proxy-listener.ts';
export { compileInterceptList, type InterceptList } from './intercept-list.ts';
export {
  compileReverseRoutes,
  DEFAULT_REVERSE_ROUTES,
  ReverseRoutesSchema,
  type ReverseRoutes,
  type ReverseTarget,
} from './reverse-routes.ts';
export { asSvcError, errorBody, sendError } from './error-response.ts';
