/**
 * A LIST answered as the API server answers it, for unit tests' loopback
 * servers: the label and field selectors status reads by, and the three
 * forms a client may ask for in its Accept header (whole objects, their
 * metadata only, or `kubectl get`'s table rows with the printer's Status
 * cell). The real API server proves the same in e2e/status_test.ts.
 *
 * @module
 */

import type { V1Job, V1Node, V1ObjectMeta } from "@kubernetes/client-node";

type Item =
  & { metadata?: V1ObjectMeta }
  & Partial<Pick<V1Job, "status">>
  & Partial<Pick<V1Node, "spec">>;

/** The fields the API server can select Jobs and nodes by, as their field label functions name them. */
function fieldOf(item: Item, field: string): string | undefined {
  if (field === "metadata.name") return item.metadata?.name;
  if (field === "status.successful") {
    return String((item.status as V1Job["status"])?.succeeded ?? 0);
  }
  if (field === "spec.unschedulable") return String(!!(item.spec as V1Node["spec"])?.unschedulable);
  return undefined;
}

/** Whether `item` matches a selector of `k=v`, `k!=v` and bare `k` terms, by `value`. */
function matches(selector: string | null, value: (key: string) => string | undefined): boolean {
  return (selector ?? "").split(",").filter(Boolean).every((term) => {
    const [key, want] = term.split(/!?==?/);
    if (want === undefined) return value(key) !== undefined;
    return term.includes("!=") ? value(key) !== want : value(key) === want;
  });
}

/** The printer's Status cell of a Job (pkg/printers/internalversion printJob). */
export function jobStatusCell(job: V1Job): string {
  const on = (t: string) =>
    job.status?.conditions?.some((c) => c.type === t && c.status === "True");
  if (on("Complete")) return "Complete";
  if (on("Failed")) return "Failed";
  if (job.metadata?.deletionTimestamp) return "Terminating";
  for (const t of ["Suspended", "FailureTarget", "SuccessCriteriaMet"]) if (on(t)) return t;
  return "Running";
}

/**
 * The answer to `req`, a LIST of `items`: filtered by its `labelSelector`
 * and `fieldSelector`, in the form its Accept header asks, in one page.
 */
export function listAnswer(req: Request, items: readonly Item[]): Response {
  const url = new URL(req.url);
  const picked = items.filter((i) =>
    matches(url.searchParams.get("labelSelector"), (k) => i.metadata?.labels?.[k]) &&
    matches(url.searchParams.get("fieldSelector"), (f) => fieldOf(i, f))
  );
  const accept = req.headers.get("accept") ?? "";
  const metadata = { resourceVersion: "1" };
  if (accept.includes("as=PartialObjectMetadataList")) {
    return Response.json({
      kind: "PartialObjectMetadataList",
      metadata,
      items: picked.map((i) => ({ metadata: i.metadata })),
    });
  }
  if (!accept.includes("as=Table")) return Response.json({ metadata, items: picked });
  const withObject = url.searchParams.get("includeObject") !== "None";
  return Response.json({
    kind: "Table",
    metadata,
    columnDefinitions: [{ name: "Name" }, { name: "Status" }],
    rows: picked.map((i) => ({
      cells: [i.metadata?.name, jobStatusCell(i as V1Job)],
      object: withObject ? { metadata: i.metadata } : undefined,
    })),
  });
}
