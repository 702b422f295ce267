import assert from "node:assert/strict";
import { ApiError } from "../kube/client.ts";
import { FakeConfigMaps } from "../testing/fake_configmaps.ts";
import {
  FleetLease,
  type Holder,
  LEASE_SECS,
  leaseHolder,
  type LeaseMember,
  leaseName,
  leaseNeeds,
  processAlive,
  readHolder,
  RENEW_MS,
  thisProcessHost,
} from "./lease.ts";

const NOW = Date.parse("2026-12-03T12:00:00Z");
const ME = { id: "me", host: "bastion" };
const held = (over: Record<string, string> = {}) => ({
  holder: "bob@other pid 7",
  holderId: "bob",
  host: "other",
  pid: "7",
  fleet: "f.yaml",
  renewedAt: new Date(NOW - 5_000).toISOString(),
  durationSecs: String(LEASE_SECS),
  ...over,
});

// [case, the lease's data, whether a process of this host is alive, held by another?]
const CASES: [string, Record<string, string> | undefined, boolean | undefined, boolean][] = [
  ["no lease", undefined, undefined, false],
  ["another holder's, renewed 5 s ago", held(), undefined, true],
  ["released", held({ released: new Date(NOW - 5_000).toISOString() }), undefined, false],
  ["mine", held({ holderId: "me" }), undefined, false],
  [
    "expired (renewed 16 s ago)",
    held({ renewedAt: new Date(NOW - 16_000).toISOString() }),
    true,
    false,
  ],
  ["this host's, its process gone (kill -9)", held({ host: "bastion" }), false, false],
  ["this host's, its process alive", held({ host: "bastion" }), true, true],
  ["this host's, whether it runs unknown", held({ host: "bastion" }), undefined, true],
];

// Two bastions whose hostname could not be told (no HOSTNAME exported, no
// /etc/hostname: every macOS laptop) are not one host: the other's pid is
// looked for here, not found, and its live lease was taken over at once.
Deno.test("leaseHolder: a live lease of a host that could not be told is held, whatever pid runs here", () => {
  const unknown = thisProcessHost(undefined, () => {
    throw new Deno.errors.NotFound("/etc/hostname");
  });
  const me = { id: "me", host: unknown };
  assert.notEqual(leaseHolder(held({ host: unknown }), me, NOW, () => false), undefined);
});

for (const [name, data, alive, isHeld] of CASES) {
  Deno.test(`leaseHolder: ${name}`, () => {
    assert.equal(leaseHolder(data, ME, NOW, () => alive) !== undefined, isHeld);
  });
}

/** Clusters of fake ConfigMaps, a fake clock, and what the lease said. */
function fakeClusters(names: string[]) {
  const apis = new Map(names.map((n) => [n, new FakeConfigMaps()]));
  const members: LeaseMember[] = names.map((name) => {
    const api = apis.get(name)!;
    return {
      name,
      namespace: "ops",
      kube: {
        serverClockOffsetMs: 0,
        request: (v: string, m: string, p: string, b?: unknown) => api.request(v, m, p, b),
        get: async <T>(p: string) => {
          try {
            return await api.request<T>("get", "GET", p);
          } catch (e) {
            if (e instanceof ApiError && e.status === 404) return undefined;
            throw e;
          }
        },
      } as LeaseMember["kube"],
    };
  });
  let now = NOW;
  const said: string[] = [];
  const sleeps: (() => void)[] = [];
  const deps = {
    now: () => now,
    sleep: (ms: number, signal: AbortSignal) =>
      new Promise<void>((resolve) => {
        const done = () => {
          now += signal.aborted ? 0 : ms;
          resolve();
        };
        sleeps.push(done);
        signal.addEventListener("abort", () => resolve(), { once: true });
      }),
    alive: () => undefined,
    warn: (m: string) => said.push(m),
    lost: (c: string, line: string) => said.push(`lost ${c}: ${line}`),
  };
  const tick = () => sleeps.splice(0).forEach((f) => f());
  return { apis, members, deps, said, tick, advance: (ms: number) => (now += ms) };
}

const holder = (id: string): Holder => ({
  id,
  name: `${id}@bastion pid 1`,
  host: "bastion",
  pid: 1,
  fleet: "f.yaml",
});
const NAME = leaseName("drv");
/** The lease's data in one fake cluster. */
const dataOf = (api: FakeConfigMaps) =>
  (api.get(NAME)?.data ?? {}) as Record<string, string | undefined>;

Deno.test("FleetLease takes the lease in every cluster; a second process is refused, creating nothing", async () => {
  const f = fakeClusters(["c1", "c2"]);
  const first = new FleetLease(f.members, "drv", holder("one"), f.deps);
  assert.equal(await first.take(), undefined);
  for (const api of f.apis.values()) assert.equal(dataOf(api).holderId, "one");
  const writes = () =>
    [...f.apis.values()].flatMap((a) => a.requests.filter((r) => r.method !== "GET"));
  const before = writes().length;
  const second = new FleetLease(f.members, "drv", holder("two"), f.deps);
  const refused = await second.take();
  assert.match(
    refused!,
    /^refused: fleet lease fleet-lease\.drv in cluster c1 is held by one@bastion pid 1 \(fleet f\.yaml\), renewed 2026-12-03T12:00:00Z \(0 s ago\); creating nothing: stop that process first, or, if it is gone, run again after 2026-12-03T12:00:15Z \(15 s\)$/,
  );
  assert.equal(writes().length, before, "the refused process wrote nothing");
  await first.release();
});

Deno.test("FleetLease is refused when any cluster has a live lease, before writing in any", async () => {
  const f = fakeClusters(["c1", "c2"]);
  await new FleetLease([f.members[1]], "drv", holder("one"), f.deps).take();
  const refused = await new FleetLease(f.members, "drv", holder("two"), f.deps).take();
  assert.match(refused!, /in cluster c2 is held by one@/);
  assert.equal(f.apis.get("c1")!.get(NAME), undefined, "nothing created in c1");
});

Deno.test("FleetLease takes over a lease whose holder stopped renewing, after LEASE_SECS", async () => {
  const f = fakeClusters(["c1"]);
  await new FleetLease(f.members, "drv", holder("dead"), f.deps).take(); // then kill -9: no renewal
  f.advance(LEASE_SECS * 1000 - 1000);
  assert.match(
    (await new FleetLease(f.members, "drv", holder("two"), f.deps).take())!,
    /held by dead@/,
  );
  f.advance(1001);
  assert.equal(await new FleetLease(f.members, "drv", holder("three"), f.deps).take(), undefined);
  assert.equal(dataOf(f.apis.get("c1")!).holderId, "three");
});

Deno.test("FleetLease renews every RENEW_MS and, released, leaves it to the next process at once", async () => {
  const f = fakeClusters(["c1"]);
  const lease = new FleetLease(f.members, "drv", holder("one"), f.deps);
  await lease.take();
  const renewedAt = () => dataOf(f.apis.get("c1")!).renewedAt;
  const first = renewedAt();
  f.tick();
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(Date.parse(renewedAt()!) - Date.parse(first!), RENEW_MS);
  await lease.release();
  assert.ok(dataOf(f.apis.get("c1")!).released);
  assert.equal(await new FleetLease(f.members, "drv", holder("two"), f.deps).take(), undefined);
});

Deno.test("FleetLease says it lost the lease when another process took it over", async () => {
  const f = fakeClusters(["c1"]);
  const lease = new FleetLease(f.members, "drv", holder("one"), f.deps);
  await lease.take();
  f.advance(LEASE_SECS * 1000 + 1); // ours expired (an outage of c1, say)
  await new FleetLease(f.members, "drv", holder("two"), f.deps).take();
  f.tick();
  await new Promise((r) => setTimeout(r, 0));
  assert.match(
    f.said.join("\n"),
    /lost c1: fleet: lost the lease fleet-lease\.drv in cluster c1 to two@/,
  );
  await lease.release();
  assert.equal(
    dataOf(f.apis.get("c1")!).holderId,
    "two",
    "ours is not released over theirs",
  );
});

Deno.test("readHolder shows the live holder for fleet status, none once released", async () => {
  const f = fakeClusters(["c1"]);
  const lease = new FleetLease(f.members, "drv", holder("one"), f.deps);
  await lease.take();
  assert.equal((await readHolder(f.members[0], "drv", NOW))?.holder, "one@bastion pid 1");
  await lease.release();
  assert.equal(await readHolder(f.members[0], "drv", NOW), undefined);
});

Deno.test("processAlive: this process runs, a reaped one does not", async () => {
  assert.equal(processAlive(Deno.pid), true);
  const child = new Deno.Command(Deno.execPath(), { args: ["eval", "setTimeout(() => {}, 60000)"] })
    .spawn();
  child.kill("SIGKILL");
  await child.status;
  assert.equal(processAlive(child.pid), false);
});

Deno.test("leaseNeeds asks for get and update of the lease by its name, create of any (RBAC names no create)", () => {
  assert.deepEqual(
    leaseNeeds("ns", "upg").map((n) => `${n.verb} ${n.resource} ${n.name ?? "-"} @${n.namespace}`),
    [
      "get configmaps fleet-lease.upg @ns",
      "create configmaps - @ns",
      "update configmaps fleet-lease.upg @ns",
    ],
  );
});
