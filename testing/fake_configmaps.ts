/**
 * An in-memory stand-in for the API server's ConfigMaps, for unit tests of
 * the writers that keep one (the run record): GET, PUT and POST of one
 * object by name, with the API server's optimistic concurrency. A PUT that
 * carries a `resourceVersion` other than the stored one is refused with 409
 * `Conflict`, one without it replaces the object; a PUT of a missing object
 * is 404 (a ConfigMap's update does not create); a POST of an existing one is
 * 409 `AlreadyExists`. Each write gives the object the next resourceVersion.
 *
 * @module
 */

import { ApiError } from "../kube/client.ts";

/** A ConfigMap as the fake keeps it. */
export type FakeConfigMap = {
  metadata:
    & { name: string; namespace?: string; resourceVersion?: string }
    & Record<string, unknown>;
} & Record<string, unknown>;

/** One request the fake answered (or refused). */
export interface FakeRequest {
  /** GET, PUT or POST. */
  method: string;
  /** The ConfigMap's name. */
  name: string;
  /** The answer's status: 200, 201, 404, 409. */
  status: number;
  /** The resourceVersion the request carried. */
  resourceVersion?: string;
}

/** The answer of the next handler, for {@linkcode FakeConfigMaps.intercept}. */
export type Next = () => Promise<unknown>;

/** ConfigMaps in memory, answering `Kube.request`'s calls as the API server does. */
export class FakeConfigMaps {
  #objects = new Map<string, FakeConfigMap>();
  #rv = 100;
  /** Every request answered, in order. */
  readonly requests: FakeRequest[] = [];
  /**
   * Stands between a request and its answer: a test makes another writer act
   * first, or loses the answer of a write that was applied.
   */
  intercept?: (method: string, name: string, next: Next) => Promise<unknown>;

  /** The stored object of `name`, a copy, or undefined. */
  get(name: string): FakeConfigMap | undefined {
    const o = this.#objects.get(name);
    return o && structuredClone(o);
  }

  /** Removes `name`, as `kubectl delete` or the garbage collector would. */
  delete(name: string): void {
    this.#objects.delete(name);
  }

  /** `Kube.request`: a GET, PUT or POST of a ConfigMap. */
  request<T>(verb: string, method: string, path: string, body?: unknown): Promise<T> {
    const m = path.match(/\/configmaps(?:\/([^/?]+))?/);
    if (!m) throw new Error(`FakeConfigMaps: not a ConfigMap path: ${path}`);
    const sent = body as FakeConfigMap | undefined;
    const name = m[1] ?? sent?.metadata.name ?? "";
    const next = () => Promise.resolve().then(() => this.#answer(verb, method, name, sent));
    return (this.intercept ? this.intercept(method, name, next) : next()) as Promise<T>;
  }

  #answer(verb: string, method: string, name: string, body?: FakeConfigMap): unknown {
    const have = this.#objects.get(name);
    const rv = body?.metadata.resourceVersion;
    const refuse = (status: number, reason: string, message: string) => {
      this.requests.push({ method, name, status, resourceVersion: rv });
      throw new ApiError({ status, reason, verb, resource: "configmaps", message });
    };
    if (method === "GET") {
      if (!have) refuse(404, "NotFound", `configmaps "${name}" not found`);
      this.requests.push({ method, name, status: 200 });
      return structuredClone(have);
    }
    if (method === "PUT") {
      if (!have) refuse(404, "NotFound", `configmaps "${name}" not found`);
      if (rv !== undefined && rv !== have!.metadata.resourceVersion) {
        refuse(
          409,
          "Conflict",
          `Operation cannot be fulfilled on configmaps "${name}": the object has been modified; ` +
            "please apply your changes to the latest version and try again",
        );
      }
    } else if (method === "POST") {
      if (have) refuse(409, "AlreadyExists", `configmaps "${name}" already exists`);
      if (rv !== undefined) {
        refuse(400, "BadRequest", "resourceVersion should not be set on objects to be created");
      }
    } else throw new Error(`FakeConfigMaps: no ${method}`);
    const stored = structuredClone(body!);
    stored.metadata.resourceVersion = String(++this.#rv);
    this.#objects.set(name, stored);
    this.requests.push({
      method,
      name,
      status: method === "POST" ? 201 : 200,
      resourceVersion: rv,
    });
    return structuredClone(stored);
  }
}
