#!/usr/bin/env bash
# Flows 1 to 3 of the specification over REST, against a running control plane.
# Usage: SVC_BOOTSTRAP_ADMIN_KEY=... bash docs/examples/flows.sh [http://127.0.0.1:8080]
set -euo pipefail
CP=${1:-http://127.0.0.1:8080}
ROOT=${SVC_BOOTSTRAP_ADMIN_KEY:?set SVC_BOOTSTRAP_ADMIN_KEY to the root administrator key}
json() { curl -sS -H 'content-type: application/json' "$@"; }
field() { node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s)[process.argv[1]]))' "$1"; }

# A tenant and an administrator key for it (the root administrator acts for it with X-Tenant-ID).
json -X POST "$CP/v1/tenants" -H "x-api-key: $ROOT" -d '{"tenant_id":"acme","name":"Acme"}' >/dev/null || true
KEY=$(json -X POST "$CP/v1/api-keys" -H "x-api-key: $ROOT" -H 'x-tenant-id: acme' \
  -d '{"name":"acme-admin","scopes":["admin"]}' | field key_secret)

# Flow 1: a budget of 1 USD (alerts at 80 % and 100 % by default), then an envelope: 201 AUTHORIZED.
BUDGET=$(json -X POST "$CP/v1/budgets" -H "x-api-key: $KEY" \
  -d '{"name":"team","type":"cost","limits":{"max_cost_usd":1}}' | field budget_id)
ENV=$(json -X POST "$CP/v1/envelopes" -H "x-api-key: $KEY" \
  -d "{\"budget_id\":\"$BUDGET\",\"adapter_type\":\"langchain\"}" | field envelope_id)
echo "envelope $ENV: $(json "$CP/v1/envelopes/$ENV" -H "x-api-key: $KEY" | field state)"

# Flow 2: events with cost; 0.85 USD crosses 80 % (budgets.warning), 1.05 USD crosses 100 %:
# budgets.exceeded, the envelope is terminated, and a further event gets 409.
for cost in 0.5 0.35 0.2; do
  json -X POST "$CP/v1/envelopes/$ENV/events" -H "x-api-key: $KEY" \
    -d "{\"event_type\":\"llm.call\",\"timestamp\":\"$(date -u +%FT%TZ)\",\"model\":\"gpt-4o\",\"tokens\":{\"input\":1200,\"output\":300},\"cost_usd\":$cost}"
  echo
done
json "$CP/v1/budgets/$BUDGET/usage" -H "x-api-key: $KEY"; echo
json "$CP/v1/envelopes/$ENV" -H "x-api-key: $KEY" | field state
json -o /dev/null -w 'further event: HTTP %{http_code}\n' -X POST "$CP/v1/envelopes/$ENV/events" -H "x-api-key: $KEY" \
  -d "{\"event_type\":\"llm.call\",\"timestamp\":\"$(date -u +%FT%TZ)\",\"cost_usd\":0.01}"

# Flow 3: a policy denying shell tools; evaluation says deny, and an envelope for a denied start is 403.
json -X POST "$CP/v1/policies" -H "x-api-key: $KEY" \
  -d '{"name":"no-shell","priority":500,"rules":[{"action":"tool:shell*","effect":"deny"},{"action":"execution:start","effect":"deny","conditions":[{"field":"metadata.tool_name","operator":"eq","value":"shell"}]}]}' >/dev/null
json -X POST "$CP/v1/policies/evaluate" -H "x-api-key: $KEY" -d '{"action":"tool:shell_exec","context":{}}'; echo
BUDGET2=$(json -X POST "$CP/v1/budgets" -H "x-api-key: $KEY" -d '{"name":"b2","type":"cost","limits":{"max_cost_usd":5}}' | field budget_id)
json -X POST "$CP/v1/envelopes" -H "x-api-key: $KEY" \
  -d "{\"budget_id\":\"$BUDGET2\",\"adapter_type\":\"custom\",\"metadata\":{\"tool_name\":\"shell\"}}"; echo
# Every action above is in the tenant's hash-chained audit log.
json "$CP/v1/audit/verify" -H "x-api-key: $KEY"; echo
