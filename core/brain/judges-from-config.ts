import type { Registry } from 'prom-client';
import type { Config } from '../config/schema.ts';
import { requiredSetting } from '../config/required.ts';
import { secretFileReader } from '../config/secret-file.ts';
import { builtinJudgeOptions, createBuiltinJudge, type BuiltinJudge } from './builtin-judge.ts';
import { createJudgeSelector, parseTenantModes, type JudgeSelector } from './judge-selection.ts';
import { createLlmJudge, type LlmJudge } from './llm/llm-judge.ts';

export interface Judges {
  builtin: BuiltinJudge;
  /** Present when some tenant (or the default) chose `llm` or `both`. */
  llm: LlmJudge | undefined;
  selector: JudgeSelector;
}

/**
 * The process's judges from its configuration: the built-in judge always, the LLM judge when
 * the default mode or a tenant's choice needs it (then `semantic_judge_llm_url` is required).
 */
export function judgesFromConfig(
  config: Config,
  deps: {
    registry: Registry;
    processName: string;
    costUsd: (model: string, usage: { input: number; output: number }) => number;
  },
): Judges {
  const builtin = createBuiltinJudge(builtinJudgeOptions(config));
  const tenantModes = parseTenantModes(config.semantic_judge_tenant_modes);
  const needsLlm = config.semantic_judge_mode !== 'builtin' || [...tenantModes.values()].some((m) => m !== 'builtin');
  let llm: LlmJudge | undefined;
  if (needsLlm) {
    const baseUrl = requiredSetting(config.semantic_judge_llm_url, 'SVC_SEMANTIC_JUDGE_LLM_URL', deps.processName);
    llm = createLlmJudge({
      baseUrl,
      model: config.semantic_judge_llm_model,
      apiKey: secretFileReader(config.semantic_judge_llm_key_file),
      timeoutMs: config.semantic_judge_llm_timeout_ms,
      failMode: config.semantic_judge_llm_fail_mode,
      cacheEntries: config.semantic_judge_llm_cache_entries,
      cacheTtlMs: config.semantic_judge_llm_cache_ttl_seconds * 1000,
      maxTextChars: config.semantic_judge_max_text_chars,
      dailyBudgetUsd: config.semantic_judge_llm_budget_usd_per_day,
      costUsd: deps.costUsd,
      registry: deps.registry,
    });
  }
  const selector = createJudgeSelector({ defaultMode: config.semantic_judge_mode, tenantModes, builtin, llm });
  return { builtin, llm, selector };
}
