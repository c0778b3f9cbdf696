/** The desired-set apply engine: plan, order, execute, dry-run. */
export { describeObject, groupKind, objectKey, refOf, type ApplyClient, type ObjectRef } from './client.js';
export { appliedHash, appliedHashKey, driftPaths, withAppliedHash } from './compare.js';
export { backoffDelay, defaultRetryPolicy, type RetryPolicy, type Sleep } from '../concurrency.js';
export { applyRanks, rankName, rankOf, unknownKindRank, type ApplyRank } from './order.js';
export { formatPlan, planApply, type DesiredSet, type FormatPlanOptions, type KindRef, type Plan, type PlanAction, type PlanEntry, type PlanOptions } from './plan.js';
export {
  ApplyFailedError,
  ApplyInterruptedError,
  ManifestsRejectedError,
  applyResultOf,
  defaultConcurrency,
  dryRunPlan,
  dryRunStandInNamespace,
  executePlan,
  isRefusal,
  isRetryable,
  outcomes,
  type ApplyFailure,
  type ApplyResult,
  type DryRunOptions,
  type DryRunProblem,
  type DryRunReport,
  type ExecuteOptions,
  type ObjectFailure,
  type ObjectResult,
  type Outcome,
} from './execute.js';
