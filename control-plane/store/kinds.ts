/** Record kinds kept per tenant. The key of every record is [tenant, kind, id]. */
export type Kind =
  | 'envelope'
  | 'budget'
  | 'policy'
  | 'approval'
  | 'api_key'
  | 'audit'
  | 'event'
  | 'execution'
  | 'budget_envelope'
  | 'lease'
  | 'event_log'
  | 'envelope_event'
  | 'meta';
