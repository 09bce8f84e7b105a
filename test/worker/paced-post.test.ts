import { describe, expect, it } from 'vitest';
import type { TokenWait } from '../../src/rate/index.js';
import { PacedPost } from '../../src/worker/paced-post.js';

/** A token wait that records what its holder told it (the bucket's side is token-bucket.test.ts's). */
function recordingWait(): TokenWait & { cancels: number; sends: number[] } {
  const w = {
    granted: Promise.resolve(true),
    takenAt: Date.now(),
    cancels: 0,
    sends: [] as number[],
    cancel: () => void w.cancels++,
    sent: (at: number) => void w.sends.push(at),
  };
  return w;
}

describe('PacedPost: a create’s or an invite’s token, carried to its POST', () => {
  it('gives the token back when no POST was tried on it', () => {
    const wait = recordingWait();
    new PacedPost(wait, () => Promise.reject(new Error('not asked'))).settle();
    expect(wait.cancels).toBe(1);
  });

  it('keeps a token a POST was tried on, and tells it when the POST left', () => {
    const wait = recordingWait();
    const post = new PacedPost(wait, () => Promise.reject(new Error('not asked')));
    const onWire = post.tried();
    onWire(1234.5);
    post.settle();
    expect(wait.cancels).toBe(0);
    expect(wait.sends).toEqual([1234.5]);
  });

  it('renewed (held through a lookup), gives the stale token back and sends on a fresh one', async () => {
    const stale = recordingWait();
    const fresh = recordingWait();
    let taken = 0;
    const post = new PacedPost(stale, () => {
      taken++;
      return Promise.resolve(fresh);
    });
    await post.renew();
    expect(stale.cancels).toBe(1);
    expect(taken).toBe(1);
    post.tried()(99);
    post.settle();
    expect(fresh.sends).toEqual([99]);
    expect(fresh.cancels).toBe(0);
    expect(stale.sends).toEqual([]);
  });
});
