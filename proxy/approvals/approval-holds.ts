import type { RequestReply, Signals, Subscription } from '../../core/bus/bus.ts';
import { timeOrderedUuid, type Actor } from '../../core/domain/index.ts';
import { ERROR_CATALOGUE, isSvcError, type SvcCode } from '../../core/errors/index.ts';
import {
  ApprovalStandingSchema,
  syncSubjects,
  type ApprovalHoldRequest,
  type ApprovalStanding,
} from '../../core/sync/contract.ts';
import type { GateVerdict } from '../governance/policy-gate.ts';
import type { ApprovalMetrics, HoldOutcome } from '../metrics/index.ts';
import { overHeldBytes, type HeldBytes } from '../holds/held-bytes.ts';
import { HeldCalls, type HoldEnding } from '../holds/held-calls.ts';
import { heldContext } from './held-context.ts';
import { Withdrawals } from './withdrawals.ts';

/** How long the withdrawal of an ended hold's approval is retried, and the longest wait between tries. */
const WITHDRAW_FOR_MS = 10 * 60_000;
const WITHDRAW_MAX_DELAY_MS = 30_000;

export interface ApprovalHoldOptions {
  tenantId: string;
  /** Who asks for the approvals this proxy opens. */
  requestedBy: Actor;
  /** How long a call waits for its approval before it is refused. */
  timeoutMs: number;
  /** Calls held at once; one more is refused at once. */
  maxHeld: number;
  /** Approvals opened in a minute at most; one more is refused at once. */
  opensPerMinute: number;
  /** How often a held call asks how its approval stands, and how long one ask may take. */
  recheckMs: number;
}

/** What releases a held call: its approval decided, or a refusal to open it that will not change. */
type Decided =
  | { outcome: 'approved' | 'rejected'; standing: ApprovalStanding }
  | { outcome: 'failed'; code: SvcCode; message: string };

/** The decision a standing carries, if it carries one. */
function decisionOf(standing: ApprovalStanding): Decided | null {
  if (standing.status === 'APPROVED') return { outcome: 'approved', standing };
  if (standing.status === 'REJECTED') return { outcome: 'rejected', standing };
  return null;
}

/**
 * Holds the calls a REQUIRE_APPROVAL decision stops, each until its approval is decided on any
 * surface, or its timeout passes. Nothing is sent upstream meanwhile (the gate answers before
 * the lease and the upstream request). The pending approval is opened by request-reply under
 * an id chosen here, and asked about again every `recheckMs` under the same id: an ask whose
 * answer was lost, or that the control plane missed while it restarted, opens nothing twice.
 * The decision arrives as a signal on `svc.<tenant>.signals.approval` and releases the call at
 * once; the re-check covers a signal missed while NATS or the control plane was away.
 *
 * The calls are held by `HeldCalls` (proxy/holds/), as are the calls of paused envelopes.
 * Bounded: at most `opensPerMinute` approvals are opened a minute, at most `maxHeld` calls
 * wait, and their requests' decoded bytes count against
 * `proxy_held_max_bytes` with the pause holds' (one more is refused at once, fail closed); each
 * also holds an approval context of bounded size.
 * `close` refuses every held call (shutdown); nothing is dropped silently.
 */
export class ApprovalHolds {
  readonly #options: ApprovalHoldOptions;
  readonly #requests: RequestReply;
  readonly #signals: Signals;
  readonly #metrics: ApprovalMetrics;
  readonly #logger: { warn(object: Record<string, unknown>, message: string): void };
  readonly #held: HeldCalls<Decided>;
  readonly #withdrawals: Withdrawals;
  /** When each approval of the last minute was opened, oldest first: at most `opensPerMinute`. */
  readonly #opened: number[] = [];

  constructor(
    options: ApprovalHoldOptions,
    messaging: { requests: RequestReply; signals: Signals },
    metrics: ApprovalMetrics,
    logger: { warn(object: Record<string, unknown>, message: string): void },
    /** The bound on held requests' bytes, shared with the pause holds. */
    bytes: HeldBytes,
  ) {
    this.#options = options;
    this.#requests = messaging.requests;
    this.#signals = messaging.signals;
    this.#metrics = metrics;
    this.#logger = logger;
    this.#held = new HeldCalls(options.maxHeld, bytes, (size) => metrics.held.set(size));
    this.#withdrawals = new Withdrawals(
      (request) => this.#requests.request(syncSubjects.approval(request.tenant_id), request, options.recheckMs),
      { firstDelayMs: options.recheckMs, maxDelayMs: WITHDRAW_MAX_DELAY_MS, giveUpAfterMs: WITHDRAW_FOR_MS },
      logger,
    );
  }

  /** Listens for decisions; held calls are released by them from then on. */
  async listen(): Promise<Subscription> {
    return this.#signals.subscribeSignals(syncSubjects.approvalDecided(this.#options.tenantId), (data) => {
      const parsed = ApprovalStandingSchema.safeParse(data);
      if (!parsed.success || parsed.data.tenant_id !== this.#options.tenantId) {
        this.#logger.warn({ issues: parsed.error?.issues.length ?? 0 }, 'approval signal does not parse; ignored');
        return;
      }
      const decided = decisionOf(parsed.data);
      if (decided !== null) this.#held.release(parsed.data.approval_id, decided);
    });
  }

  /** How many calls are held now. */
  get size(): number {
    return this.#held.size;
  }

  /**
   * Holds the call `verdict` (REQUIRE_APPROVAL) stopped until its approval is decided, and
   * answers with the verdict that then applies: allowed once approved; refused with the
   * approval's id when rejected, not decided in time, over a bound, or at shutdown. `bytes` is
   * the decoded size of the request held. `signal` aborts when the call is cancelled (its client
   * left, its envelope ended): the hold ends and frees its place.
   */
  async await(
    action: string,
    context: Readonly<Record<string, unknown>>,
    verdict: GateVerdict,
    signal: AbortSignal,
    bytes: number,
  ): Promise<GateVerdict> {
    const { maxHeld, timeoutMs } = this.#options;
    const full = this.#held.refusal(bytes);
    if (full !== null) {
      this.#metrics.holds.inc({ outcome: full === 'shutdown' ? 'shutdown' : 'full' });
      switch (full) {
        case 'shutdown':
          return refusal(
            verdict,
            'SVC-SYS-9001',
            `${action} needs an approval and the proxy is shutting down; no approval was opened`,
          );
        case 'full':
          return refusal(
            verdict,
            'SVC-SYS-9005',
            `${action} needs an approval, and ${maxHeld} calls already wait for one at this proxy (proxy_approval_max_held); refused without opening an approval`,
          );
        case 'bytes':
          return refusal(
            verdict,
            'SVC-SYS-9005',
            `${action} needs an approval, and ${overHeldBytes(this.#held.bytes, bytes)}; refused without opening an approval`,
          );
      }
    }
    if (!this.#mayOpen()) {
      this.#metrics.holds.inc({ outcome: 'full' });
      return refusal(
        verdict,
        'SVC-SYS-9005',
        `${action} needs an approval, and ${this.#options.opensPerMinute} were opened at this proxy in the last minute (proxy_approval_opens_per_minute); refused without opening an approval`,
      );
    }
    const request = this.#request(action, context, verdict);
    const held = await this.#hold(request, bytes, signal);
    if (held.outcome !== 'released') this.#withdraw(request, held.outcome);
    const ending = held.outcome === 'released' ? held.value : held;
    this.#metrics.holds.inc({ outcome: ending.outcome satisfies HoldOutcome });
    const id = request.approval_id;
    switch (ending.outcome) {
      case 'approved':
        return {
          ...verdict,
          allowed: true,
          terminate: false,
          message: `${action}: approved (approval ${id}, reviewer ${ending.standing.reviewer_id ?? 'unknown'})`,
        };
      case 'rejected': {
        const note = ending.standing.review_note;
        return refusal(
          verdict,
          'SVC-POL-2004',
          `${action}: approval ${id} was rejected by ${ending.standing.reviewer_id ?? 'a reviewer'}${note === null ? '' : `: ${note}`}`,
        );
      }
      case 'timed_out':
        return refusal(
          verdict,
          'SVC-POL-2004',
          `${action}: approval ${id} was not decided within ${timeoutMs / 1000} s (proxy_approval_timeout_seconds): ${request.reason}`,
        );
      case 'shutdown':
        return refusal(verdict, 'SVC-SYS-9001', `${action}: the proxy shut down while approval ${id} was pending`);
      case 'cancelled':
        return refusal(
          verdict,
          'SVC-POL-2004',
          `${action}: the call was cancelled (its client left, or its envelope ended) while approval ${id} was pending`,
        );
      case 'failed':
        return refusal(verdict, ending.code, `${action}: approval ${id} could not be opened: ${ending.message}`);
    }
  }

  /**
   * Refuses every held call (shutdown), and every call that would be held from now on. Resolves
   * once the held calls' handlers have run on (their refusals written), so that the listener
   * closing its connections next does not cut them off unanswered, and their approvals'
   * withdrawals have been sent once.
   */
  async close(): Promise<void> {
    await this.#held.close();
    await this.#withdrawals.close();
  }

  /** Counts an approval about to be opened, unless the last minute already holds the most allowed. */
  #mayOpen(): boolean {
    const now = Date.now();
    while (this.#opened.length > 0 && this.#opened[0]! <= now - 60_000) this.#opened.shift();
    if (this.#opened.length >= this.#options.opensPerMinute) return false;
    this.#opened.push(now);
    return true;
  }

  #request(action: string, context: Readonly<Record<string, unknown>>, verdict: GateVerdict): ApprovalHoldRequest {
    const envelopeId = context.envelope_id;
    return {
      tenant_id: this.#options.tenantId,
      approval_id: timeOrderedUuid(new Date()),
      requested_by: this.#options.requestedBy,
      action,
      context: heldContext(context),
      envelope_id: typeof envelopeId === 'string' ? envelopeId : null,
      policy_id: verdict.result?.matched_policy ?? '',
      rule_id: verdict.result?.matched_rule ?? '',
      reason: verdict.result?.message ?? verdict.result?.reason ?? verdict.message,
    };
  }

  /**
   * Tells the control plane that the call ended undecided, over the channel that opened its
   * approval, so that the approval waits for no reviewer (it is rejected in this proxy's name);
   * retried while the control plane does not answer.
   */
  #withdraw(request: ApprovalHoldRequest, outcome: 'timed_out' | 'shutdown' | 'cancelled'): void {
    const withdrawn = {
      timed_out: `not decided within ${this.#options.timeoutMs / 1000} s (proxy_approval_timeout_seconds); the call was refused`,
      shutdown: 'the proxy holding the call shut down; the call was refused',
      cancelled: 'the held call was cancelled (its client left, or its envelope ended)',
    }[outcome];
    this.#withdrawals.withdraw({ ...request, withdrawn });
  }

  #hold(request: ApprovalHoldRequest, bytes: number, signal: AbortSignal): Promise<HoldEnding<Decided>> {
    const { recheckMs, timeoutMs } = this.#options;
    const id = request.approval_id;
    return this.#held.hold(id, bytes, timeoutMs, signal, (release) => {
      let done = false;
      let warned = false;
      let recheck: NodeJS.Timeout | undefined;
      const ask = async (): Promise<void> => {
        try {
          const decided = decisionOf(
            ApprovalStandingSchema.parse(
              await this.#requests.request(syncSubjects.approval(request.tenant_id), request, recheckMs),
            ),
          );
          if (decided !== null) release(decided);
        } catch (error) {
          // A refusal that will not change (a request the control plane cannot take) ends the hold, fail closed.
          if (isSvcError(error) && !ERROR_CATALOGUE[error.code].retryable) {
            release({ outcome: 'failed', code: error.code, message: error.message });
            return;
          }
          // Once per hold: a control plane away for long must not turn every re-check into a log line.
          if (!warned) {
            warned = true;
            this.#logger.warn(
              { approval_id: id, err: (error as Error).message },
              'approval hold request unanswered; asking again every recheck',
            );
          }
        }
        if (!done) recheck = setTimeout(() => void ask(), recheckMs);
      };
      void ask();
      return () => {
        done = true;
        clearTimeout(recheck);
      };
    });
  }
}

function refusal(verdict: GateVerdict, code: SvcCode, message: string): GateVerdict {
  return { ...verdict, allowed: false, code, message };
}
