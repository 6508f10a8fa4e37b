export { ApprovalHolds, type ApprovalHoldOptions } from './approval-holds.ts';
