import type { CompiledCheck } from './condition.ts';
import type { FieldReader } from './field-path.ts';
import { UNKNOWN_VALUE } from './unknown-value.ts';

/**
 * The checks of a ruleset numbered once at compile time: checks with the same field, operator
 * and value share a number, so an evaluation answers each of them once however many rules hold
 * it (a thousand rules often repeat a few `tool_name`, `matches` and `contains` conditions), and
 * reads each field of the context once.
 */
export interface CheckTable {
  /** Per rule, the number of each of its checks, in the rule's order; -1 for one asked afresh each time. */
  readonly ids: readonly Int32Array[];
  readonly checkCount: number;
  /** The field each numbered check reads, as an index into `readers`. */
  readonly fieldOf: Int32Array;
  readonly readers: readonly FieldReader[];
}

export function numberChecks(rules: readonly { readonly checks: readonly CompiledCheck[] }[]): CheckTable {
  const checkIds = new Map<string, number>();
  const fieldIds = new Map<string, number>();
  const fieldOf: number[] = [];
  const readers: FieldReader[] = [];
  const idOf = (check: CompiledCheck): number => {
    // A `sequence` check answers by the clock, so it is asked each time as before.
    if (check.key === undefined) return -1;
    let id = checkIds.get(check.key);
    if (id !== undefined) return id;
    id = fieldOf.length;
    checkIds.set(check.key, id);
    let field = fieldIds.get(check.field);
    if (field === undefined) {
      field = readers.length;
      fieldIds.set(check.field, field);
      readers.push(check.read);
    }
    fieldOf.push(field);
    return id;
  };
  const ids = rules.map((rule) => Int32Array.from(rule.checks, idOf));
  return { ids, checkCount: fieldOf.length, fieldOf: Int32Array.from(fieldOf), readers };
}

const NOT_READ = Symbol('not read');
const LAST_EPOCH = 0x3fffffff;

/**
 * One evaluation's answers, by check number. Marks carry the evaluation's epoch, so starting
 * the next evaluation clears nothing; a synchronous evaluation reuses its ruleset's instance.
 */
export class CheckAnswers {
  readonly #table: CheckTable;
  /** Per check: epoch * 2 + 1 when it passed, epoch * 2 when it failed, older epochs unknown. */
  readonly #marks: Uint32Array;
  /** The same for a check on a list or an object, two per check: read for some element (a deny), and for every one. */
  readonly #structuredMarks: Uint32Array;
  /** Per field: its value in this evaluation's context, or NOT_READ. */
  readonly #values: unknown[];
  #epoch = 0;
  /** True while an evaluation uses this instance. */
  inUse = false;

  constructor(table: CheckTable) {
    this.#table = table;
    this.#marks = new Uint32Array(table.checkCount);
    this.#structuredMarks = new Uint32Array(table.checkCount * 2);
    this.#values = table.readers.map(() => NOT_READ);
  }

  /** Starts an evaluation: every answer is unknown again. */
  begin(): void {
    if (++this.#epoch > LAST_EPOCH) {
      this.#marks.fill(0);
      this.#structuredMarks.fill(0);
      this.#epoch = 1;
    }
  }

  /** Ends an evaluation: drops the context values it read, so the instance holds no input between calls. */
  end(): void {
    this.#values.fill(NOT_READ);
  }

  /** Whether all of a rule's checks pass on `context`. */
  pass(checks: readonly CompiledCheck[], ids: Int32Array, context: Readonly<Record<string, unknown>>): boolean {
    const marks = this.#marks;
    const known = this.#epoch * 2;
    for (let c = 0; c < ids.length; c++) {
      const id = ids[c] as number;
      if (id < 0) {
        if (!answer(checks[c] as CompiledCheck, (checks[c] as CompiledCheck).read(context))) return false;
        continue;
      }
      let mark = marks[id] as number;
      if (mark < known) {
        const field = this.#table.fieldOf[id] as number;
        let value = this.#values[field];
        if (value === NOT_READ) {
          value = (this.#table.readers[field] as FieldReader)(context);
          this.#values[field] = value;
        }
        // A list or an object is read by each rule's effect (every element for an allow, some
        // for the rest; an unreadable shape holds only for the rest): its answers are kept apart
        // by reading. A scalar's is the same for every rule (a comparison's and a `matches`'s
        // key hold the reading).
        if (value !== null && typeof value === 'object') {
          const check = checks[c] as CompiledCheck;
          const slot = id * 2 + (check.reading === 'every' ? 1 : 0);
          let structuredMark = this.#structuredMarks[slot] as number;
          if (structuredMark < known) {
            structuredMark = known + (answerStructured(check, value) ? 1 : 0);
            this.#structuredMarks[slot] = structuredMark;
          }
          if (structuredMark === known) return false;
          continue;
        }
        mark = known + (answer(checks[c] as CompiledCheck, value) ? 1 : 0);
        marks[id] = mark;
      }
      if (mark === known) return false;
    }
    return true;
  }
}

/** A condition on a missing field does not match, whatever its operator. */
function answer(check: CompiledCheck, value: unknown): boolean {
  return value !== undefined && check.test(value);
}

/** The same for a list or an object: one on a value not known yet fails closed. */
function answerStructured(check: CompiledCheck, value: object): boolean {
  return value === UNKNOWN_VALUE ? check.reading === 'some' : check.test(value);
}
