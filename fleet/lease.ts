/**
 * The fleet's lease: keeps two fleet processes of the same rollout apart.
 * A single run has its owner Job to guard it (run/owner_guard.ts); a fleet
 * runs from a bastion and has none, so two `job-dispatcher fleet` commands
 * of the same prefix (a second terminal, a cron overlapping a manual run)
 * would each start every cluster's run and race for its nodes.
 *
 * The lease is a ConfigMap, `fleet-lease.<prefix>`, in the Jobs' namespace
 * of every cluster of the fleet, not a `coordination.k8s.io` Lease: the run
 * already keeps its record in a ConfigMap of that namespace and is granted
 * `create` on ConfigMaps there, `get` and `update` on its record by name
 * (the chart's run-record Role, `job-dispatcher rbac`): the lease adds `get`
 * and `update` of `fleet-lease.<prefix>` (the fleet's pre-flight names them
 * when missing). It is named by the prefix alone: two fleet files that
 * roll the same prefix into a shared cluster race there just as two copies
 * of one file do.
 *
 * Taken before the first write anywhere, every cluster's lease read first:
 * a live one of another holder refuses the process, creating nothing. It is
 * renewed every {@linkcode RENEW_MS} with the resourceVersion last written
 * (a lost race is a 409, never a silent overwrite) and released at the end.
 * A holder killed with `kill -9` renews no more: its lease is taken over
 * once {@linkcode LEASE_SECS} passed since its last renewal, or at once from
 * the same host when its process is gone (a re-run on the bastion that
 * crashed goes on at once, as the kill -9 e2e step does).
 *
 * Times are the API server's (the `Date` header's offset, kube/client.ts),
 * so two bastions' clocks never disagree about an expiry.
 *
 * @module
 */

import { labelValue } from "../job.ts";
import { ApiError, type Kube } from "../kube/client.ts";
import type { PermissionNeed } from "../run/preflight.ts";
import { recordName } from "../report/record.ts";
import { approvalName } from "./cluster.ts";

/**
 * How long a lease lives after its last renewal. Three renewals fit in it,
 * so one slow answer of a loaded API server loses nothing; short, so a
 * re-run from another bastion after a crash waits at most this long.
 */
export const LEASE_SECS = 15;

/** How often the holder renews its lease. */
export const RENEW_MS = (LEASE_SECS * 1000) / 3;

/** Who holds a lease: this process, as another one reads it. */
export interface Holder {
  /** Unique per process. */
  id: string;
  /** `user@host pid N`, for the refusal line. */
  name: string;
  /** The host, and the process on it (a gone process on our host is taken over at once). */
  host: string;
  pid: number;
  /** The fleet file, for the refusal line. */
  fleet: string;
}

/** This process as a holder (no --allow-sys: the hostname from the environment). */
export function thisProcess(fleet: string): Holder {
  const env = (k: string) => {
    try {
      return Deno.env.get(k);
    } catch {
      return undefined;
    }
  };
  const host = thisProcessHost(env("HOSTNAME"));
  const user = env("USER") ?? env("USERNAME") ?? "someone";
  return {
    id: crypto.randomUUID(),
    name: `${user}@${host} pid ${Deno.pid}`,
    host,
    pid: Deno.pid,
    fleet,
  };
}

/**
 * This host's name: `$HOSTNAME`, else /etc/hostname, else a placeholder.
 *
 * @param read reads /etc/hostname (a test gives its own)
 */
export function thisProcessHost(
  hostname: string | undefined,
  read: () => string = () => Deno.readTextFileSync("/etc/hostname"),
): string {
  if (hostname) return hostname;
  try {
    return read().trim() || UNKNOWN_HOST;
  } catch {
    return UNKNOWN_HOST;
  }
}

/**
 * The host of a process that could not tell its own: no process of ours can
 * say whether the holder's pid runs on the holder's machine, so only the
 * expiry frees its lease.
 */
const UNKNOWN_HOST = "unknown-host";

/**
 * The lease's ConfigMap name for a prefix.
 *
 * @example
 * ```ts
 * leaseName("upgrade"); // "fleet-lease.upgrade"
 * ```
 */
export function leaseName(prefix: string): string {
  // A ConfigMap name is a DNS subdomain: a label value may have capitals and "_".
  return `fleet-lease.${labelValue(prefix).toLowerCase().replace(/[^a-z0-9.-]/g, "-")}`;
}

/** A live lease of another holder, as the refusal and `fleet status` say it. */
export interface HeldBy {
  holder: string;
  fleet: string;
  /** The last renewal, and when it expires (ms, the API server's clock). */
  renewedAt: number;
  expiresAt: number;
}

/**
 * Whether a lease's data leave it to `me`: none, released, mine, expired,
 * or its holder's process gone from this host; else who holds it.
 * `alive` says whether a process of this host runs (undefined: unknown).
 */
export function leaseHolder(
  data: Record<string, string> | undefined,
  me: Pick<Holder, "id" | "host">,
  serverNow: number,
  alive: (pid: number) => boolean | undefined,
): HeldBy | undefined {
  if (!data?.holderId || data.released || data.holderId === me.id) return undefined;
  const renewedAt = Date.parse(data.renewedAt ?? "");
  const expiresAt = renewedAt + Number(data.durationSecs ?? LEASE_SECS) * 1000;
  if (!(expiresAt > serverNow)) return undefined;
  // Same host, and its process gone: a kill -9 on this bastion, gone at once.
  // A pid reused since still runs, and the expiry then frees it.
  const here = data.host === me.host && data.host !== UNKNOWN_HOST;
  if (here && alive(Number(data.pid)) === false) return undefined;
  return {
    holder: data.holder ?? "an unnamed holder",
    fleet: data.fleet ?? "",
    renewedAt,
    expiresAt,
  };
}

/**
 * Whether process `pid` of this host runs, asked with a signal: reading
 * `/proc` needs `--allow-all` in Deno, and signal 0 is not offered.
 * SIGURG's default action is to ignore it (POSIX), and the Go runtime
 * takes it as its own preemption tick, so a live holder, or whatever
 * process reused its pid, is not disturbed. No such process: false; one of
 * another user (EPERM): true; no right to signal: unknown.
 */
export function processAlive(pid: number): boolean | undefined {
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  try {
    Deno.kill(pid, "SIGURG");
    return true;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return false;
    if (e instanceof Deno.errors.PermissionDenied) return true;
    return undefined;
  }
}

/**
 * The rights the lease needs in each cluster's namespace, for the pre-flight:
 * get and update of the lease by its name (a Role may grant them on that one
 * ConfigMap), create of any (RBAC cannot name the object of a create).
 */
export function leaseNeeds(namespace: string, prefix: string): PermissionNeed[] {
  const cms = {
    group: "",
    resource: "configmaps",
    namespace,
    flags: ["fleet (its lease)"],
    grant: "Role job-dispatcher-run-record",
  };
  const name = leaseName(prefix);
  return [
    { verb: "get", ...cms, name },
    { verb: "create", ...cms },
    { verb: "update", ...cms, name },
  ];
}

/**
 * What the fleet stops without in a cluster, beyond its lease: the run
 * record's get and update by its name (the fleet counts a cluster by its
 * closing record, and stops the line when it is lost: optional to a single
 * run, required here) and the get of each approval it waits on there
 * (`fleet-approval.<prefix>.<stage>`). Asked before the first cluster runs,
 * so a Role that names only `run-record.<prefix>` (rbac's output) or none
 * of them fails here, not after a stage rolled out.
 */
export function fleetNeeds(
  namespace: string,
  prefix: string,
  approvalStages: readonly string[],
): PermissionNeed[] {
  const cms = {
    group: "",
    resource: "configmaps",
    namespace,
    grant: "Role job-dispatcher-run-record",
  };
  const flags = ["fleet (it counts a cluster by its run record)"];
  return [
    ...leaseNeeds(namespace, prefix),
    { verb: "get", ...cms, name: recordName(prefix), flags },
    { verb: "update", ...cms, name: recordName(prefix), flags },
    ...approvalStages.map((stage) => ({
      verb: "get",
      ...cms,
      name: approvalName(prefix, stage),
      flags: [`fleet (stage ${stage}'s approval)`],
      grant: "a Role naming fleet-approval.<prefix>.<stage> (docs/fleet.md)",
    })),
  ];
}

const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d+Z$/, "Z");

/**
 * The one line a refused fleet process says (exit 3, fleet/command.ts
 * `withLease`): who holds the lease, and when it may be taken over.
 */
export function refusal(cluster: string, name: string, h: HeldBy, serverNow: number): string {
  const ago = Math.max(0, Math.round((serverNow - h.renewedAt) / 1000));
  const left = Math.max(0, Math.ceil((h.expiresAt - serverNow) / 1000));
  return `refused: fleet lease ${name} in cluster ${cluster} is held by ${h.holder}` +
    `${h.fleet ? ` (fleet ${h.fleet})` : ""}, renewed ${iso(h.renewedAt)} (${ago} s ago); ` +
    `creating nothing: stop that process first, or, if it is gone, run again after ` +
    `${iso(h.expiresAt)} (${left} s)`;
}

/** One cluster of the lease. */
export interface LeaseMember {
  /** The context. */
  name: string;
  kube: Pick<Kube, "request" | "get" | "serverClockOffsetMs">;
  namespace: string;
}

type LeaseMap = { metadata?: { resourceVersion?: string }; data?: Record<string, string> };

const configMaps = (ns: string) => `/api/v1/namespaces/${encodeURIComponent(ns)}/configmaps`;

/** The API server's now, on our clock's reading. */
const serverNow = (m: LeaseMember, now: number) => now + (m.kube.serverClockOffsetMs ?? 0);

/** What the lease needs around it. */
export interface LeaseDeps {
  /** The clock (ms since the epoch). */
  now: () => number;
  /** Waits `ms`, or less when `signal` aborts. */
  sleep: (ms: number, signal: AbortSignal) => Promise<void>;
  /** Whether a process of this host runs ({@linkcode processAlive}). */
  alive: (pid: number) => boolean | undefined;
  /** Said once per cluster while its renewals fail (an outage); the lease is kept. */
  warn: (msg: string) => void;
  /** Another holder took the lease in `cluster` (ours expired in an outage): the fleet stops. */
  lost: (cluster: string, line: string) => void;
}

/**
 * The fleet's lease in every cluster: {@linkcode FleetLease.take} it before
 * the first write, {@linkcode FleetLease.release} it at the end.
 */
export class FleetLease {
  #members: LeaseMember[];
  #me: Holder;
  #name: string;
  #deps: LeaseDeps;
  /** The resourceVersion of each cluster's lease as we last wrote it. */
  #rv = new Map<string, string>();
  #stop = new AbortController();
  #renewing: Promise<void>[] = [];

  /**
   * @param members the fleet's clusters
   * @param prefix the Jobs' name prefix (the lease's name)
   */
  constructor(members: LeaseMember[], prefix: string, me: Holder, deps: LeaseDeps) {
    this.#members = members;
    this.#me = me;
    this.#name = leaseName(prefix);
    this.#deps = deps;
  }

  /** The ConfigMap's name. */
  get name(): string {
    return this.#name;
  }

  /**
   * Takes the lease in every cluster and starts renewing it; or, when a
   * live one of another holder is found, returns the refusal line, having
   * created nothing (every lease is read before any is written).
   *
   * @throws {ApiError} when a cluster cannot be read or refuses the write
   */
  async take(): Promise<string | undefined> {
    const seen = await Promise.all(this.#members.map((m) => this.#read(m)));
    for (const [i, m] of this.#members.entries()) {
      const refused = this.#refusal(m, seen[i]);
      if (refused) return refused;
    }
    const taken: LeaseMember[] = [];
    for (const [i, m] of this.#members.entries()) {
      const refused = await this.#write(m, seen[i]);
      if (refused) {
        // Another process took it between our read and our write: leave it all to that one.
        await this.#releaseIn(taken);
        return refused;
      }
      taken.push(m);
    }
    this.#renewing = this.#members.map((m) => this.#renewLoop(m));
    return undefined;
  }

  /** Stops renewing and releases the lease wherever it is still ours (never throws). */
  async release(): Promise<void> {
    this.#stop.abort();
    await Promise.all(this.#renewing);
    await this.#releaseIn(this.#members.filter((m) => this.#rv.has(m.name)));
  }

  async #read(m: LeaseMember): Promise<LeaseMap | undefined> {
    return await m.kube.get<LeaseMap>(`${configMaps(m.namespace)}/${this.#name}`);
  }

  #refusal(m: LeaseMember, cm: LeaseMap | undefined): string | undefined {
    const now = serverNow(m, this.#deps.now());
    const held = leaseHolder(cm?.data, this.#me, now, this.#deps.alive);
    return held && refusal(m.name, this.#name, held, now);
  }

  #body(m: LeaseMember, rv: string | undefined, released = false) {
    const me = this.#me;
    const data: Record<string, string> = {
      holder: me.name,
      holderId: me.id,
      host: me.host,
      pid: String(me.pid),
      fleet: me.fleet,
      renewedAt: new Date(serverNow(m, this.#deps.now())).toISOString(),
      durationSecs: String(LEASE_SECS),
    };
    if (released) data.released = data.renewedAt;
    return {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: this.#name, namespace: m.namespace, resourceVersion: rv },
      data,
    };
  }

  /** Creates or takes over the lease (with the resourceVersion read); a lost race is the refusal. */
  async #write(m: LeaseMember, cm: LeaseMap | undefined): Promise<string | undefined> {
    const rv = cm?.metadata?.resourceVersion;
    try {
      const wrote = rv === undefined
        ? await m.kube.request<LeaseMap>(
          "create",
          "POST",
          configMaps(m.namespace),
          this.#body(m, rv),
        )
        : await m.kube.request<LeaseMap>(
          "update",
          "PUT",
          `${configMaps(m.namespace)}/${this.#name}`,
          this.#body(m, rv),
        );
      this.#rv.set(m.name, wrote?.metadata?.resourceVersion ?? "");
      return undefined;
    } catch (e) {
      if (!(e instanceof ApiError) || e.status !== 409) throw e;
      const now = await this.#read(m);
      if (now?.data?.holderId === this.#me.id) {
        // Our write landed and its answer was lost: a resend found it.
        this.#rv.set(m.name, now.metadata?.resourceVersion ?? "");
        return undefined;
      }
      return this.#refusal(m, now) ?? `refused: fleet lease ${this.#name} in cluster ${m.name} ` +
          "changed while it was taken; creating nothing: run again";
    }
  }

  /**
   * Renews the lease in one cluster every {@linkcode RENEW_MS} until
   * released. A renewal that fails (an outage of that cluster) is said once
   * and tried again: no other process took it meanwhile unless ours expired,
   * and then the write's resourceVersion is stale, a 409, and it is lost.
   */
  async #renewLoop(m: LeaseMember): Promise<void> {
    const stop = this.#stop.signal;
    let failing = false;
    while (!stop.aborted) {
      await this.#deps.sleep(RENEW_MS, stop);
      if (stop.aborted) return;
      try {
        await this.#renew(m);
        failing = false;
      } catch (e) {
        if (e instanceof LostLease) {
          this.#rv.delete(m.name);
          return this.#deps.lost(m.name, e.message);
        }
        if (!failing) {
          this.#deps.warn(
            `fleet: cannot renew the lease ${this.#name} in cluster ${m.name}: ` +
              `${(e as Error).message}; trying again every ${RENEW_MS / 1000} s`,
          );
        }
        failing = true;
      }
    }
  }

  async #renew(m: LeaseMember): Promise<void> {
    const path = `${configMaps(m.namespace)}/${this.#name}`;
    try {
      const wrote = await m.kube.request<LeaseMap>(
        "update",
        "PUT",
        path,
        this.#body(m, this.#rv.get(m.name)),
      );
      this.#rv.set(m.name, wrote?.metadata?.resourceVersion ?? "");
    } catch (e) {
      if (!(e instanceof ApiError) || (e.status !== 409 && e.status !== 404)) throw e;
      const now = await this.#read(m);
      if (now?.data?.holderId === this.#me.id && !now.data.released) {
        // Our renewal landed and its answer was lost: go on from it.
        this.#rv.set(m.name, now.metadata?.resourceVersion ?? "");
        return;
      }
      throw new LostLease(
        `fleet: lost the lease ${this.#name} in cluster ${m.name} to ${
          now?.data?.holder ?? "its deletion"
        } (ours expired while this cluster could not be reached); no further cluster starts`,
      );
    }
  }

  /** Marks the lease released where it is ours (never throws: it expires anyway). */
  async #releaseIn(members: LeaseMember[]): Promise<void> {
    await Promise.all(members.map(async (m) => {
      try {
        await m.kube.request(
          "update",
          "PUT",
          `${configMaps(m.namespace)}/${this.#name}`,
          this.#body(m, this.#rv.get(m.name), true),
        );
      } catch {
        // Taken over, or unreachable: it expires after LEASE_SECS.
      }
      this.#rv.delete(m.name);
    }));
  }
}

/** Another holder has the lease now. */
class LostLease extends Error {}

/**
 * Who holds the fleet's lease in a cluster, for `fleet status`: its live
 * holder, or undefined when none holds it.
 *
 * @throws {ApiError} when the cluster cannot be read
 */
export async function readHolder(
  m: LeaseMember,
  prefix: string,
  now: number,
): Promise<HeldBy | undefined> {
  const cm = await m.kube.get<LeaseMap>(`${configMaps(m.namespace)}/${leaseName(prefix)}`);
  // Nobody is "me" here: any live holder is shown.
  return leaseHolder(cm?.data, { id: "", host: "" }, serverNow(m, now), () => undefined);
}
