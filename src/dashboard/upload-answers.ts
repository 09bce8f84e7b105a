import { randomBytes } from 'node:crypto';
import type { RedisClient } from '../redis/index.js';
import { z } from 'zod';
import { uploadAnswerKey } from '../keys/index.js';

/*
 * An upload's answer, kept for a short while so the POST can redirect to a page (POST-redirect-
 * GET): reloading that page shows the answer again instead of sending the file a second time.
 * Key `<p>:dashboard:upload:<token>`, a random token, expiring after ANSWER_TTL_SECONDS.
 */
const ANSWER_TTL_SECONDS = 15 * 60;
export const ANSWER_TOKEN = /^[A-Za-z0-9_-]{22}$/;

const UploadAnswerSchema = z.object({
  runId: z.string(),
  retried: z.number().int().nonnegative(),
  ignored: z.array(z.object({ row: z.number().int().nullable(), line: z.number().int(), reason: z.string() })),
  ignoredCount: z.number().int().nonnegative(),
  /** Rows a later run had written in full: not sent (`skipped`), or sent as new writes (`resent`). */
  writtenLater: z
    .object({ skipped: z.number().int().nonnegative(), resent: z.number().int().nonnegative() })
    .default({ skipped: 0, resent: 0 }),
});
export type StoredUploadAnswer = z.infer<typeof UploadAnswerSchema>;
export type UploadAnswerInput = z.input<typeof UploadAnswerSchema>;

export async function saveUploadAnswer(redis: RedisClient, prefix: string, answer: UploadAnswerInput): Promise<string> {
  const token = randomBytes(16).toString('base64url');
  await redis.set(uploadAnswerKey(prefix, token), JSON.stringify(answer), 'EX', ANSWER_TTL_SECONDS);
  return token;
}

/** The answer, or null when the token is unknown, expired or malformed. */
export async function loadUploadAnswer(
  redis: RedisClient,
  prefix: string,
  token: string,
): Promise<StoredUploadAnswer | null> {
  if (!ANSWER_TOKEN.test(token)) return null;
  const raw = await redis.get(uploadAnswerKey(prefix, token));
  if (raw === null) return null;
  const parsed = UploadAnswerSchema.safeParse(JSON.parse(raw));
  return parsed.success ? parsed.data : null;
}
