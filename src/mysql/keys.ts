import { createHash } from "node:crypto";

/**
 * The `GET_LOCK` name of a resource (`prefix + key`): its SHA-256 in base64url, 43 characters
 * (MySQL and MariaDB take names of at most 64). Two resources with the same name would share one
 * lock — exclude each other, never both hold one key — at odds of about n² / 2²⁵⁷ for n names.
 */
export function lockName(resource: string): string {
  return createHash("sha256").update(resource, "utf8").digest("base64url");
}
