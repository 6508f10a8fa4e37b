export { covers, ZERO, PICO_PER_MICRO, type Allowance, type Amount } from './amounts.ts';
export {
  BudgetLease,
  isRefusal,
  type LeaseMode,
  type LeaseObserver,
  type LeaseRefusal,
  type LeaseSettings,
  type Reservation,
} from './budget-lease.ts';
export { LeaseBook } from './lease-book.ts';
export { CIRCUIT_STATE_VALUE, createControlPlaneCircuit, type ControlPlaneCircuit } from './control-plane-circuit.ts';
