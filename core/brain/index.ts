export * from './builtin-judge.ts';
export * from './judge-request.ts';
export * from './judge-selection.ts';
export * from './judges-from-config.ts';
export { createLlmJudge, LLM_JUDGE_NAME, type LlmJudge, type LlmJudgeOptions } from './llm/llm-judge.ts';
export { JUDGE_PROMPT_MARKER, JUDGE_PROMPT_VERSION, LlmVerdictSchema } from './llm/judge-prompt.ts';
export * from './oracle/overrun.ts';
export * from './oracle/overrun-request.ts';
export { MAX_RECENT_ACTIONS, RecentActionSchema, recentActionsOf, type RecentAction } from './immune/sequences.ts';
