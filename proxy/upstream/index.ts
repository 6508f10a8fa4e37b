export { clientResponseHeaders, upstreamRequestHeaders } from './header-filter.ts';
export { parseUpstreamOverrides, upstreamTarget, type UpstreamOverrides, type UpstreamTarget } from './overrides.ts';
export { parseNameUrlList, type NamedUrl, type NameRule } from './name-url-list.ts';
export { relayResponse } from './relay-response.ts';
export { upstreamTrust } from './upstream-ca.ts';
export {
  UpstreamClient,
  type UpstreamClientOptions,
  type UpstreamRequest,
  type UpstreamResponse,
} from './upstream-client.ts';
export {
  keySourcesFromConfig,
  ProviderCredentials,
  type CredentialLogger,
  type KeySource,
  type ProviderCredentialsOptions,
} from './provider-credentials.ts';
