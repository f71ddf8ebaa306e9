/** RetryPolicy bounds how a client retries. */
export interface RetryPolicy {
  /** deadlineMs is how long one call may keep retrying, from its first attempt. Defaults to 30 s. */
  deadlineMs: number;
  /** initialBackoffMs caps the first wait. Defaults to 50 ms. */
  initialBackoffMs: number;
  /** maxBackoffMs caps every wait. Defaults to 2 s. */
  maxBackoffMs: number;
}

export const defaultRetryPolicy: RetryPolicy = { deadlineMs: 30_000, initialBackoffMs: 50, maxBackoffMs: 2_000 };

/**
 * backoffMs is the wait before retry number `attempt` (0-based): capped
 * exponential backoff with full jitter, a uniform draw from
 * [0, min(maxBackoffMs, initialBackoffMs * 2^attempt)).
 */
export function backoffMs(policy: RetryPolicy, attempt: number, random: () => number): number {
  const cap = Math.min(policy.maxBackoffMs, policy.initialBackoffMs * 2 ** Math.min(attempt, 30));
  return random() * cap;
}
