/**
 * Who the API server says we are, asked before the first write, as
 * `kubectl auth whoami` asks it (a SelfSubjectReview): the user learns on
 * the first line which identity the run acts with, impersonation included.
 *
 * @module
 */

import { ApiError, type Kube } from "./client.ts";

/** The SelfSubjectReview collection (authentication.k8s.io/v1, Kubernetes 1.28+). */
export const SELF_SUBJECT_REVIEWS = "/apis/authentication.k8s.io/v1/selfsubjectreviews";

/**
 * The username the API server authenticated us as, or undefined when it
 * cannot say: the API is absent (404, before Kubernetes 1.28) or forbidden
 * to us (403). Other failures are the run's failures and are thrown.
 *
 * @throws {ApiError} when the API server refuses the credentials or cannot be reached
 */
export async function whoAmI(kube: Kube): Promise<string | undefined> {
  try {
    const review = await kube.request<{ status?: { userInfo?: { username?: string } } }>(
      "create",
      "POST",
      SELF_SUBJECT_REVIEWS,
      { apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" },
    );
    return review.status?.userInfo?.username || undefined;
  } catch (e) {
    if (e instanceof ApiError && (e.status === 404 || e.status === 403)) return undefined;
    throw e;
  }
}

/**
 * The first line of a run.
 *
 * @example
 * ```ts
 * connectedLine("https://k8s:6443", "system:serviceaccount:ops:dispatcher");
 * // "connected to https://k8s:6443 as system:serviceaccount:ops:dispatcher"
 * ```
 */
export function connectedLine(server: string, user?: string): string {
  return user ? `connected to ${server} as ${user}` : `connected to ${server}`;
}
