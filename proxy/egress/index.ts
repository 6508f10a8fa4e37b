export { AddressPolicy, embeddedIpv4, type AddressPolicyOptions, type PrivateEgress } from './address-policy.ts';
export { EgressGuard, systemResolve, type EgressGuardOptions, type Resolve } from './egress-guard.ts';
export { createEgressCheck, parsePorts, type EgressDecision, type EgressRuleDeps } from './egress-rules.ts';
