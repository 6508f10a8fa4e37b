export {
  BUDGET_HEADER,
  ENVELOPE_HEADER,
  EXECUTION_HEADER,
  EnvelopeRegistry,
  type Cutter,
  type Ending,
  type EnvelopeRegistryOptions,
  type LocalEnvelope,
  type Resolution,
} from './envelope-registry.ts';
export { whileInflight } from './while-inflight.ts';
