import type { JudgeInput, JudgeVerdictInput, SemanticJudge, SyncSemanticJudge } from '../policy/semantic-judge.ts';

export const JUDGE_MODES = ['builtin', 'llm', 'both'] as const;
export type JudgeMode = (typeof JUDGE_MODES)[number];

/** At or above this the built-in judge is sure enough that `both` does not ask the LLM. */
const BUILTIN_SURE = 0.8;

/**
 * `both`: the built-in judge first, in process; the LLM is asked only when the built-in judge
 * is not sure, and the stronger verdict wins, so the LLM adds what the rules miss and never
 * removes what they found. An LLM failure under fail mode `open` leaves the built-in verdict.
 */
export function combineJudges(builtin: SyncSemanticJudge, llm: SemanticJudge): SemanticJudge {
  return {
    name: `${builtin.name}+${llm.name}`,
    version: `${builtin.version}+${llm.version}`,
    async judge(input: JudgeInput): Promise<JudgeVerdictInput> {
      const own = builtin.judgeNow(input);
      if (own.violated && own.confidence >= BUILTIN_SURE) return own;
      const other = await llm.judge(input);
      return other.violated && other.confidence > own.confidence ? other : own;
    },
  };
}

/** Each tenant's judge: its own choice from `semantic_judge_tenant_modes`, else the default mode. */
export interface JudgeSelector {
  forTenant(tenant: string): SemanticJudge;
  modeOf(tenant: string): JudgeMode;
}

export function createJudgeSelector(options: {
  defaultMode: JudgeMode;
  tenantModes: ReadonlyMap<string, JudgeMode>;
  builtin: SyncSemanticJudge;
  /** Absent when no LLM endpoint is configured; then no tenant may choose `llm` or `both`. */
  llm: { forTenant(tenant: string): SemanticJudge } | undefined;
}): JudgeSelector {
  const { builtin, llm } = options;
  const modeOf = (tenant: string): JudgeMode => options.tenantModes.get(tenant) ?? options.defaultMode;
  /** Each tenant's LLM judges, made once: the LLM charges each tenant's judgements to it. */
  const made = new Map<string, { llm: SemanticJudge; both: SemanticJudge }>();
  return {
    modeOf,
    forTenant(tenant) {
      const mode = modeOf(tenant);
      if (mode === 'builtin') return builtin;
      // The configuration check (judgesFromConfig) makes this unreachable; builtin is never a silent stand-in.
      if (llm === undefined) throw new Error(`semantic judge ${mode} chosen without an LLM endpoint`);
      let judges = made.get(tenant);
      if (judges === undefined) {
        const own = llm.forTenant(tenant);
        judges = { llm: own, both: combineJudges(builtin, own) };
        made.set(tenant, judges);
      }
      return mode === 'llm' ? judges.llm : judges.both;
    },
  };
}

/** `tenant=llm,other=both` as a map (the schema has checked its shape). */
export function parseTenantModes(text: string): Map<string, JudgeMode> {
  const modes = new Map<string, JudgeMode>();
  for (const pair of text.split(',')) {
    const [tenant, mode] = pair.split('=').map((p) => p.trim());
    if (tenant === undefined || tenant === '' || mode === undefined) continue;
    if ((JUDGE_MODES as readonly string[]).includes(mode)) modes.set(tenant, mode as JudgeMode);
  }
  return modes;
}
