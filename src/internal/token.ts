import { randomBytes } from "node:crypto";

/** Bytes of randomness in a lock token (the contract asks for at least 16). */
export const TOKEN_BYTES = 16;
const POOL_TOKENS = 256;

let pool = Buffer.alloc(0);
let offset = 0;

/**
 * A fresh random ownership token: 16 bytes from the CSPRNG as 32 hex characters. Bytes are drawn
 * 4 KiB at a time (each byte used once), which costs a fraction of a `randomBytes(16)` call each.
 */
export function newToken(): string {
  if (offset + TOKEN_BYTES > pool.length) {
    pool = randomBytes(TOKEN_BYTES * POOL_TOKENS);
    offset = 0;
  }
  const token = pool.toString("hex", offset, offset + TOKEN_BYTES);
  offset += TOKEN_BYTES;
  return token;
}
