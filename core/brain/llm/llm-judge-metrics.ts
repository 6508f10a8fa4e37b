import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/** What the LLM judge reports: its calls, their latency, cache hits, failures by reason and its own spend. */
export interface LlmJudgeMetrics {
  calls: Counter<'outcome'>;
  latency: Histogram;
  cacheHits: Counter;
  failures: Counter<'reason'>;
  costUsd: Counter;
}

export function createLlmJudgeMetrics(registry: Registry, cacheSize: () => number): LlmJudgeMetrics {
  new Gauge({
    name: 'svc_semantic_judge_llm_cache_entries',
    help: 'Verdicts held in the LLM judge cache',
    registers: [registry],
    collect() {
      this.set(cacheSize());
    },
  });
  return {
    calls: new Counter({
      name: 'svc_semantic_judge_llm_calls_total',
      help: 'Calls to the LLM judge endpoint, by outcome (ok, failed)',
      labelNames: ['outcome'],
      registers: [registry],
    }),
    latency: new Histogram({
      name: 'svc_semantic_judge_llm_latency_seconds',
      help: 'Time of a call to the LLM judge endpoint, failed calls included',
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10],
      registers: [registry],
    }),
    cacheHits: new Counter({
      name: 'svc_semantic_judge_llm_cache_hits_total',
      help: 'Judgements answered from the LLM judge cache',
      registers: [registry],
    }),
    failures: new Counter({
      name: 'svc_semantic_judge_llm_failures_total',
      help: 'LLM judgements that failed, by reason (timeout, status, unparseable, budget, network), resolved by the fail mode',
      labelNames: ['reason'],
      registers: [registry],
    }),
    costUsd: new Counter({
      name: 'svc_semantic_judge_llm_cost_usd_total',
      help: 'What the LLM judge itself spent, priced from the usage its endpoint reported',
      registers: [registry],
    }),
  };
}
