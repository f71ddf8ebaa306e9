import type { AllocationStatus } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";

/** AllocateResult gives a page and a status per key, in request order. */
export interface AllocateResult {
  pages: number[];
  statuses: AllocationStatus[];
}

/** ConfirmResult counts what a ConfirmWrite changed. */
export interface ConfirmResult {
  confirmed: number;
  released: number;
  /** completed are the positions of the keys this call made complete. */
  completed: number[];
}
