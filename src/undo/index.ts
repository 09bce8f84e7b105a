export {
  planUndo,
  refuseWhileWriting,
  type PlanUndoOptions,
  type PlanUndoResult,
  type LeftField,
} from './plan-undo.js';
export { foldWrites, type CreatedDeal, type RecordWrites } from './undo-rows.js';
