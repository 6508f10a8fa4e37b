import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { parseOrThrow, SvcError } from '../errors/index.ts';
import { highestKnownRates, priceFamily } from './unknown-model.ts';

/**
 * Prices are USD per million tokens in the file. Internally every price becomes an integer
 * number of pico-dollars per token (USD per million × 10^6), so a call's cost is an exact
 * integer (tokens × pico-dollars) and sums over any number of calls stay exact when they are
 * added as integers (see `createCostTotal`). Floating-point sums of per-call USD drift by
 * fractions of a cent over many small calls; integer pico-dollars never do. Six decimals of
 * a per-million price (0.000001 USD per million) is finer than any published list price.
 */
const PICO_PER_USD_PER_MILLION = 1_000_000;
const PICO_PER_USD = 1e12;

/** A non-negative USD figure with at most six decimals. */
function sixDecimals(unit: string) {
  return z
    .number()
    .nonnegative()
    .refine((v) => Math.abs(v * 1e6 - Math.round(v * 1e6)) < 1e-6, { message: `at most 6 decimal places (${unit})` });
}

const perMillionUsd = sixDecimals('USD per million tokens');
/** A millionth of a dollar is finer than any per-use list price. */
const usdPerUse = sixDecimals('USD per use');

const isoDate = z.iso.date();

/** USD per million tokens: input, output, and input served from the provider's prompt cache. */
const RatesSchema = z.strictObject({
  input: perMillionUsd,
  output: perMillionUsd,
  /** Price of input tokens served from the provider's prompt cache; absent means billed as input. */
  cached_input: perMillionUsd.optional(),
  /**
   * Price of input tokens written to the prompt cache, kept the short time (Anthropic's five
   * minutes) and the long (its hour); absent means billed as input.
   */
  cache_write: perMillionUsd.optional(),
  cache_write_long: perMillionUsd.optional(),
});

export const PriceEntrySchema = RatesSchema.extend({
  provider: z.string().min(1).optional(),
  /** The model's largest answer, used to bound a request that sets no max tokens. */
  max_output_tokens: z.number().int().nonnegative().optional(),
  /**
   * The rates of a call whose input (cached input included) exceeds `above_input_tokens`: the
   * whole call is billed at them, as Google and Anthropic bill their long-context tiers.
   */
  long_context: RatesSchema.extend({ above_input_tokens: z.number().int().positive() }).optional(),
  /** The rates of a call the provider served at its priority tier (OpenAI's `service_tier`). */
  priority: RatesSchema.optional(),
  /** Overrides the file's `as_of` for this entry. */
  as_of: isoDate.optional(),
});

/**
 * The tools a provider runs itself and bills per use, on top of the tokens their results add:
 * OpenAI's web search (`web_search_preview`: the preview tool's price) and file search per call,
 * its code interpreter per container, its image generation per image by quality and longer side
 * (`image_high_1536`: a high-quality 1024×1536 or 1536×1024 image); Anthropic's web search per
 * search; Gemini's Google Search grounding per grounded prompt.
 */
export const HostedToolSchema = z.enum([
  'web_search',
  'web_search_preview',
  'file_search',
  'code_interpreter',
  'image_low_1024',
  'image_low_1536',
  'image_medium_1024',
  'image_medium_1536',
  'image_high_1024',
  'image_high_1536',
  'google_search',
]);
export type HostedTool = z.infer<typeof HostedToolSchema>;

/** Uses of hosted tools, by tool. */
export const HostedUsesSchema = z.partialRecord(HostedToolSchema, z.number().int().nonnegative());
export type HostedUses = z.infer<typeof HostedUsesSchema>;

/** Per hosted tool, the larger of two counts of its uses. */
export function mostUses(a: HostedUses | undefined, b: HostedUses | undefined): HostedUses {
  const uses: HostedUses = { ...a };
  for (const [tool, n] of Object.entries(b ?? {}) as [HostedTool, number][]) uses[tool] = Math.max(uses[tool] ?? 0, n);
  return uses;
}

/** USD per use of a hosted tool, by provider (as the proxy names it) and tool. */
const ToolFeesSchema = z.record(z.string().min(1), z.partialRecord(HostedToolSchema, usdPerUse));

export const PriceFileSchema = z.strictObject({
  as_of: isoDate,
  currency: z.literal('USD').default('USD'),
  unit: z.literal('per_million_tokens').default('per_million_tokens'),
  models: z.record(z.string().min(1), PriceEntrySchema),
  tool_fees: ToolFeesSchema.optional(),
});

/** An override file may leave `as_of` out when every entry carries its own. */
export const PriceOverrideFileSchema = PriceFileSchema.extend({ as_of: isoDate.optional() });

/**
 * How a model missing from the table is priced. Never at zero: `max_known` (the default) takes
 * the highest rates known for its provider; `fixed` a configured rate; `deny` refuses the call
 * before it is sent (the proxy asks `deniesModel`), and prices what was already spent (usage
 * reported after the fact, an answer naming another model) as `max_known`.
 */
export const UnknownModelRuleSchema = z.discriminatedUnion('mode', [
  z.strictObject({ mode: z.literal('max_known') }),
  z.strictObject({ mode: z.literal('fixed'), input: perMillionUsd, output: perMillionUsd }),
  z.strictObject({ mode: z.literal('deny') }),
]);

/**
 * The tier a provider served a call at, as priced: `priority` (OpenAI's priority processing) or
 * `standard` (everything else; a flex or batch discount is not taken, so it is never under-billed).
 */
export const ServiceTierSchema = z.enum(['standard', 'priority']);
export type ServiceTier = z.infer<typeof ServiceTierSchema>;

export const TokenUsageSchema = z.object({
  input: z.number().int().nonnegative(),
  output: z.number().int().nonnegative(),
  /** The part of `input` read from the provider's prompt cache (included in `input`). */
  cachedInput: z.number().int().nonnegative(),
  /** The parts of `input` written to the prompt cache, kept the short time and the long (included in `input`). */
  cacheWrite: z.number().int().nonnegative().optional(),
  cacheWriteLong: z.number().int().nonnegative().optional(),
  /** Uses of tools the provider ran and bills per use (`HostedToolSchema`). */
  hosted: HostedUsesSchema.optional(),
});

export type PriceEntry = z.infer<typeof PriceEntrySchema>;
export type PriceFile = z.infer<typeof PriceFileSchema>;
export type PriceOverrideFile = z.infer<typeof PriceOverrideFileSchema>;
export type UnknownModelRule = z.infer<typeof UnknownModelRuleSchema>;
export type TokenUsage = z.infer<typeof TokenUsageSchema>;

/** Rates in integer pico-dollars per token. */
export interface Rates {
  readonly inputPico: number;
  readonly outputPico: number;
  readonly cachedInputPico: number;
  readonly cacheWritePico: number;
  readonly cacheWriteLongPico: number;
}

/** A price entry compiled for arithmetic: integer pico-dollars per token. */
export interface ModelPrice extends Rates {
  readonly key: string;
  /** The `provider` of the table entry, when it names one. */
  readonly provider: string | undefined;
  /** The rates of a call whose input exceeds `aboveInputTokens`, when the model has such a tier. */
  readonly longContext: (Rates & { readonly aboveInputTokens: number }) | undefined;
  /** The rates of a call served at the priority tier, when the table lists them. */
  readonly priority: Rates | undefined;
  readonly maxOutputTokens: number | undefined;
  readonly asOf: string;
}

export interface PriceTable {
  /** Exact id first, then the longest listed id the model starts with (at a `-`, `@` or `:`). */
  lookup(model: string): ModelPrice | undefined;
  /** The rate of a model the table lacks, by the unknown-model rule; `provider` as the proxy names it. */
  unknownPrice(provider: string | undefined): ModelPrice;
  /**
   * Pico-dollars per use of a hosted tool: the provider's listed fee, else the highest any
   * provider lists for that tool (a provider the table does not price it for is never billed
   * less than the dearest), else 0 when no provider lists the tool.
   */
  toolFee(provider: string | undefined, tool: HostedTool): number;
  readonly unknownModel: UnknownModelRule;
  readonly keys: readonly string[];
}

export interface CostResult {
  costUsd: number;
  /** Exact integer cost; add these up (see `createCostTotal`) rather than `costUsd`. */
  costPicoUsd: number;
  /** False when the model is not in the table and the unknown-model rule priced it. */
  known: boolean;
  /** What priced it: the model's table entry, or the unknown-model rule that stood in. */
  basis: 'table' | 'max_known' | 'fixed';
  /** The table entry used, or `null` for an unknown model. */
  priceKey: string | null;
}

const LOOKUP_MEMO_LIMIT = 1024;
/**
 * What may follow a listed id in a name that is still that model: a dated or numbered snapshot
 * (`-2024-08-06`, `-20241022`, `-0613`, `-001`), an alias of its newest (`-latest`, the `-0` of
 * `claude-sonnet-4-0`), a version tag (`-v2`, Bedrock's `-v1:0`), a Vertex `@` version. Any other
 * suffix names another model, which may cost more (`gpt-5-pro`, `o3-deep-research`,
 * `gpt-4o-audio-preview`), so the name is unknown.
 */
const SNAPSHOT = String.raw`(?:-(?:\d{4}-\d{2}-\d{2}|\d{8}|\d{3,4}|0|latest|v\d+(?::\d+)?))*(?:@(?:\d{8}|\d{3}|latest))?`;
const SNAPSHOT_SUFFIX = new RegExp(`^${SNAPSHOT}$`);
const TRAILING_SNAPSHOT = new RegExp(`${SNAPSHOT}$`);
/** No model id is longer; a longer one keeps its suffix (the search for it is quadratic in the length). */
const MAX_SNAPSHOT_ID_LENGTH = 256;

function toPico(perMillion: number): number {
  return Math.round(perMillion * PICO_PER_USD_PER_MILLION);
}

/** A file's rates in pico-dollars per token; cache reads and writes without a price of their own are input. */
function ratesOf(rates: z.infer<typeof RatesSchema>): Rates {
  return {
    inputPico: toPico(rates.input),
    outputPico: toPico(rates.output),
    cachedInputPico: toPico(rates.cached_input ?? rates.input),
    cacheWritePico: toPico(rates.cache_write ?? rates.input),
    cacheWriteLongPico: toPico(rates.cache_write_long ?? rates.input),
  };
}

/** Lower-cases and drops path-like prefixes (`models/gemini-2.0-flash`, `openai/gpt-4o`). */
export function normalizeModelId(model: string): string {
  const slash = model.lastIndexOf('/');
  return (slash >= 0 ? model.slice(slash + 1) : model).trim().toLowerCase();
}

/**
 * The model an id names without a table: normalised, its snapshot suffix dropped
 * (`openai/GPT-4o-2024-08-06` → `gpt-4o`). It may drop more than the table's lookup would
 * (`deepseek-v3` → `deepseek`): it tells what else an id may be called, not its price.
 */
export function modelFamilyId(model: string): string {
  const id = normalizeModelId(model);
  if (id.length > MAX_SNAPSHOT_ID_LENGTH) return id;
  const suffix = TRAILING_SNAPSHOT.exec(id);
  return suffix === null || suffix.index === 0 ? id : id.slice(0, suffix.index);
}

/** Merges price files in order, later entries replacing earlier ones, into a lookup table. */
export function buildPriceTable(
  files: readonly (PriceFile | PriceOverrideFile)[],
  unknownModel: UnknownModelRule = { mode: 'max_known' },
): PriceTable {
  const prices = new Map<string, ModelPrice>();
  for (const file of files) {
    for (const [id, entry] of Object.entries(file.models)) {
      const key = normalizeModelId(id);
      const asOf = entry.as_of ?? file.as_of;
      if (asOf === undefined) {
        throw new SvcError('SVC-SYS-9002', `price entry ${id} has no as_of date and its file has none`, {}, [
          { field: `models.${id}.as_of`, description: 'required when the file has no as_of' },
        ]);
      }
      const long = entry.long_context;
      prices.set(key, {
        key,
        provider: entry.provider,
        ...ratesOf(entry),
        longContext: long === undefined ? undefined : { ...ratesOf(long), aboveInputTokens: long.above_input_tokens },
        priority: entry.priority === undefined ? undefined : ratesOf(entry.priority),
        maxOutputTokens: entry.max_output_tokens,
        asOf,
      });
    }
  }
  if (prices.size === 0 && unknownModel.mode !== 'fixed') {
    throw new SvcError('SVC-SYS-9002', 'price table lists no model: an unknown model would have no price to take', {
      fields: 'models',
    });
  }
  const highestKnown = highestKnownRates([...prices.values()]);
  const toolFee = toolFeeLookup(files);
  const fixed: ModelPrice | null =
    unknownModel.mode === 'fixed'
      ? {
          key: 'fixed',
          provider: undefined,
          ...ratesOf({ input: unknownModel.input, output: unknownModel.output }),
          longContext: undefined,
          priority: undefined,
          maxOutputTokens: undefined,
          asOf: '',
        }
      : null;
  const byLengthDesc = [...prices.keys()].sort((a, b) => b.length - a.length);
  // Per-table memo: agents use few model ids, and prefix scans are then paid once per id.
  const memo = new Map<string, ModelPrice | null>();

  function resolve(model: string): ModelPrice | undefined {
    const id = normalizeModelId(model);
    const exact = prices.get(id);
    if (exact) return exact;
    for (const key of byLengthDesc) {
      if (id.length > key.length && id.startsWith(key) && SNAPSHOT_SUFFIX.test(id.slice(key.length)))
        return prices.get(key);
    }
    return undefined;
  }

  return {
    unknownModel,
    keys: byLengthDesc,
    unknownPrice: (provider) => fixed ?? highestKnown(provider),
    toolFee,
    lookup(model) {
      const hit = memo.get(model);
      if (hit !== undefined) return hit ?? undefined;
      const found = resolve(model);
      if (memo.size >= LOOKUP_MEMO_LIMIT) memo.clear();
      memo.set(model, found ?? null);
      return found;
    },
  };
}

/** The files' tool fees merged in order, fee by fee; see `PriceTable.toolFee`. */
function toolFeeLookup(files: readonly (PriceFile | PriceOverrideFile)[]): PriceTable['toolFee'] {
  const fees = new Map<string, Map<HostedTool, number>>();
  const dearest = new Map<HostedTool, number>();
  for (const file of files) {
    for (const [provider, listed] of Object.entries(file.tool_fees ?? {})) {
      const own = fees.get(provider) ?? new Map<HostedTool, number>();
      fees.set(provider, own);
      for (const [tool, usd] of Object.entries(listed) as [HostedTool, number][])
        own.set(tool, Math.round(usd * PICO_PER_USD));
    }
  }
  for (const own of fees.values())
    for (const [tool, pico] of own) dearest.set(tool, Math.max(dearest.get(tool) ?? 0, pico));
  return (provider, tool) => {
    const listed = provider === undefined ? undefined : fees.get(priceFamily(provider))?.get(tool);
    return listed ?? dearest.get(tool) ?? 0;
  };
}

function readJson(path: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new SvcError('SVC-SYS-9002', `cannot read price table ${path}: ${(err as Error).message}`, { path });
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new SvcError('SVC-SYS-9002', `price table ${path} is not JSON: ${(err as Error).message}`, { path });
  }
}

export const DEFAULT_PRICES_PATH = new URL('../../config/prices.json', import.meta.url).pathname;

export interface LoadPriceTableOptions {
  /** The shipped table; defaults to config/prices.json. */
  defaultPath?: string;
  /** A second file merged over the default, entry by entry. */
  overridePath?: string;
  unknownModel?: UnknownModelRule;
}

/** Reads and validates the price files (start-up work: synchronous, throws SVC-SYS-9002 naming the field). */
export function loadPriceTable(options: LoadPriceTableOptions = {}): PriceTable {
  const base = parseOrThrow(PriceFileSchema, readJson(options.defaultPath ?? DEFAULT_PRICES_PATH), 'price table');
  const files: (PriceFile | PriceOverrideFile)[] = [base];
  if (options.overridePath !== undefined) {
    files.push(parseOrThrow(PriceOverrideFileSchema, readJson(options.overridePath), 'price override table'));
  }
  return buildPriceTable(files, options.unknownModel);
}

function multiply(tokens: number, pico: number): number {
  const product = tokens * pico;
  return Number.isSafeInteger(product) ? product : Number(BigInt(tokens) * BigInt(pico));
}

/**
 * Prices one call. Cached input is a part of `input` billed at the cached price. A model the
 * table lacks is priced by the unknown-model rule, among the rates of `provider` (the proxy's
 * adapter id; without it, among every provider's). `tier` is the tier the provider served it at.
 */
export function cost(
  table: PriceTable,
  model: string,
  usage: TokenUsage,
  provider?: string,
  tier: ServiceTier = 'standard',
): CostResult {
  const listed = table.lookup(model);
  const pico = picoAt(listed ?? table.unknownPrice(provider), usage, tier) + hostedPico(table, usage, provider);
  return {
    costUsd: pico / PICO_PER_USD,
    costPicoUsd: pico,
    known: listed !== undefined,
    basis: listed !== undefined ? 'table' : table.unknownModel.mode === 'fixed' ? 'fixed' : 'max_known',
    priceKey: listed?.key ?? null,
  };
}

/** `cost`'s figure alone, in pico-dollars: what a check made many times per call needs, without the rest. */
export function costPico(
  table: PriceTable,
  model: string,
  usage: TokenUsage,
  provider?: string,
  tier: ServiceTier = 'standard',
): number {
  return picoAt(table.lookup(model) ?? table.unknownPrice(provider), usage, tier) + hostedPico(table, usage, provider);
}

/** What the hosted tools a call used bill on top of its tokens, whatever tier or model served it. */
function hostedPico(table: PriceTable, usage: TokenUsage, provider: string | undefined): number {
  const hosted = usage.hosted;
  if (hosted === undefined) return 0;
  let pico = 0;
  for (const [tool, uses] of Object.entries(hosted) as [HostedTool, number][])
    pico += multiply(uses, table.toolFee(provider, tool));
  return pico;
}

/**
 * What a priority call of a model without listed priority rates is billed at, in multiples of its
 * standard rates: the highest multiple OpenAI lists (GPT-5's 2.50 and 20 against 1.25 and 10).
 */
const PRIORITY_MULTIPLE = 2;

function ratesAt(price: ModelPrice, usage: TokenUsage, tier: ServiceTier): Rates {
  if (tier === 'priority')
    return (
      price.priority ?? {
        inputPico: price.inputPico * PRIORITY_MULTIPLE,
        outputPico: price.outputPico * PRIORITY_MULTIPLE,
        cachedInputPico: price.cachedInputPico * PRIORITY_MULTIPLE,
        cacheWritePico: price.cacheWritePico * PRIORITY_MULTIPLE,
        cacheWriteLongPico: price.cacheWriteLongPico * PRIORITY_MULTIPLE,
      }
    );
  const long = price.longContext;
  return long !== undefined && usage.input > long.aboveInputTokens ? long : price;
}

function picoAt(price: ModelPrice, usage: TokenUsage, tier: ServiceTier): number {
  const rates = ratesAt(price, usage, tier);
  // Parts of the input, each within what the parts before it left.
  const cached = Math.min(usage.cachedInput, usage.input);
  const written = Math.min(usage.cacheWrite ?? 0, usage.input - cached);
  const writtenLong = Math.min(usage.cacheWriteLong ?? 0, usage.input - cached - written);
  return (
    multiply(usage.input - cached - written - writtenLong, rates.inputPico) +
    multiply(cached, rates.cachedInputPico) +
    multiply(written, rates.cacheWritePico) +
    multiply(writtenLong, rates.cacheWriteLongPico) +
    multiply(usage.output, rates.outputPico)
  );
}

/** True when the rule is `deny` and the table lacks the model: the call must not be sent. */
export function deniesModel(table: PriceTable, model: string): boolean {
  return table.unknownModel.mode === 'deny' && table.lookup(model) === undefined;
}

/** The answer bound for a request that sets none: the table's value for the model, else `fallback`. */
export function maxOutputTokens(table: PriceTable, model: string, fallback: number): number {
  return table.lookup(model)?.maxOutputTokens ?? fallback;
}

export function picoToUsd(pico: number | bigint): number {
  if (typeof pico === 'number') return pico / PICO_PER_USD;
  // Whole dollars and the remainder separately, so totals beyond 2^53 pico-dollars stay cent-exact.
  const whole = pico / 1_000_000_000_000n;
  return Number(whole) + Number(pico - whole * 1_000_000_000_000n) / PICO_PER_USD;
}

/** An exact running total of call costs (BigInt pico-dollars, so it cannot overflow or drift). */
export interface CostTotal {
  add(costPicoUsd: number): void;
  readonly picoUsd: bigint;
  readonly usd: number;
}

export function createCostTotal(): CostTotal {
  let total = 0n;
  return {
    add(costPicoUsd) {
      total += BigInt(costPicoUsd);
    },
    get picoUsd() {
      return total;
    },
    get usd() {
      return picoToUsd(total);
    },
  };
}
