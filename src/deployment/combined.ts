import type { Locker } from "../locker.js";
import { checkDeployment } from "./check-deployment.js";
import type { Finding } from "./finding.js";

/**
 * A combined locker's findings: each member's, named by its place among the members (the combined
 * locker adds no store of its own).
 */
export async function checkMembers(members: readonly Locker[], signal: AbortSignal | undefined): Promise<Finding[]> {
  const perMember = await Promise.all(members.map((member) => checkDeployment(member, signal)));
  return perMember.flatMap((found, index) =>
    found.map((item) => ({ ...item, message: `member ${index + 1} of ${members.length}: ${item.message}` })),
  );
}
