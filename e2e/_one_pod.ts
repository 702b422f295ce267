/**
 * One pod per node at a time, on the real control plane (issue 25, item 6),
 * as steps of the node lifecycle suite:
 * - a running task pod deleted with a grace period: the Job controller
 *   starts no replacement pod on the node until the first one has ended
 *   (`podReplacementPolicy: Failed`, which the dispatcher sets), where the
 *   API's default, `TerminatingOrFailed`, starts one at once;
 * - a run SIGKILLed during a node's post-success work, whose Job its TTL
 *   then removes: the re-run finds the success kept on the node, does the
 *   work, and creates no second Job.
 *
 * kwok runs no container: a pod annotated `e2e.job-dispatcher.io/terminate:
 * graceful` stays Running until its deletionTimestamp, as a container that
 * ignores SIGTERM does (e2e/stages/pod.yaml). Every check reads the API
 * server's own view (a watch of the pods, the Jobs, the node).
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Cluster } from "./cluster.ts";
import {
  eventually,
  type FollowedWatch,
  followWatch,
  jobsIn,
  jobTemplate,
  JobWatcher,
} from "./_dispatcher.ts";
import { DispatcherProcess, runDispatcher } from "./_faults.ts";
import { namespace, serviceAccount, SUITE, suiteNodes as nodes, tempFile } from "./_fixtures.ts";

/** The marks of successes kept before their post-success work (default tracking prefix). */
const KEPT = "job-dispatcher/succeeded-job.";

interface PodView {
  metadata: { name: string; uid: string; resourceVersion: string; deletionTimestamp?: string };
  status?: { phase?: string };
}

/**
 * Every pod of a namespace as a watch shows it: which exist now, and each
 * pod that was created while another pod there had not ended yet.
 */
class PodWatch {
  /** The pods that exist now, by UID. */
  readonly live = new Map<string, PodView>();
  /** `<new> created while <old> was <phase>[, terminating]`, once per such create. */
  readonly overlaps: string[] = [];
  #watch: FollowedWatch;

  private constructor(cluster: Cluster, ns: string, rv: string) {
    const url = `${cluster.server}/api/v1/namespaces/${ns}/pods?watch=1`;
    this.#watch = followWatch<PodView>(cluster, url, rv, "pod", (t, pod) => this.#see(t, pod));
  }

  /** `+<ms> <type> <pod> <phase>[ terminating]`, for the failure message. */
  readonly log: string[] = [];
  #began = Date.now();

  #see(type: string, pod: PodView): void {
    this.log.push(
      `+${Date.now() - this.#began}ms ${type} ${pod.metadata.name} ${pod.status?.phase}${
        pod.metadata.deletionTimestamp ? " terminating" : ""
      }`,
    );
    if (type === "DELETED") {
      this.live.delete(pod.metadata.uid);
      return;
    }
    if (type === "ADDED") {
      for (const other of this.live.values()) {
        const phase = other.status?.phase ?? "Pending";
        if (phase === "Succeeded" || phase === "Failed") continue;
        const going = other.metadata.deletionTimestamp ? ", terminating" : "";
        this.overlaps.push(
          `${pod.metadata.name} created while ${other.metadata.name} was ${phase}${going}`,
        );
      }
    }
    this.live.set(pod.metadata.uid, pod);
  }

  /** Starts watching the pods of `ns`, from now. */
  static async start(cluster: Cluster, ns: string): Promise<PodWatch> {
    const r = await cluster.kubectl(["get", "pods", "-n", ns, "-o", "json"]);
    assert.equal(r.code, 0, r.stderr);
    return new PodWatch(cluster, ns, JSON.parse(r.stdout).metadata.resourceVersion);
  }

  /** Stops watching. */
  stop(): Promise<void> {
    return this.#watch.stop();
  }
}

/** A namespace with a ServiceAccount bound to the README's RBAC; returns its kubeconfig. */
async function place(cluster: Cluster, ns: string): Promise<string> {
  await namespace(cluster, ns);
  return (await serviceAccount(cluster, ns, "dispatcher")).kubeconfig;
}

/**
 * A running task pod deleted with a 30 s grace period (longer than the Job
 * controller's 10 s back-off before a replacement): with the policy the
 * dispatcher sets, no second pod of its Job is created before the first
 * ended; with the API's default (the control) one is, at once.
 */
export async function onePodPerNode(t: Deno.TestContext, cluster: Cluster): Promise<void> {
  const cases = [
    { pool: "onepod", policy: "", overlap: false },
    { pool: "twopod", policy: "  podReplacementPolicy: TerminatingOrFailed\n", overlap: true },
  ];
  await Promise.all(cases.map(async (c) => {
    const ns = `op-${c.pool}`;
    const kubeconfig = await place(cluster, ns);
    await cluster.createNodes(nodes(c.pool, 1));
    const tpl = jobTemplate(c.pool, "6s")
      .replace("backoffLimit: 0\n", `backoffLimit: 1\n${c.policy}`)
      .replace(
        '        e2e.job-dispatcher.io/duration: "6s"\n',
        '        e2e.job-dispatcher.io/duration: "6s"\n' +
          "        e2e.job-dispatcher.io/terminate: graceful\n",
      );
    const pods = await PodWatch.start(cluster, ns);
    const p = new DispatcherProcess(cluster, [
      ...["--job-template", await tempFile(tpl), "-n", ns],
      ...["--node-selector", `${SUITE}=${c.pool}`],
    ], { kubeconfig, timeoutMs: 180_000 });
    let first: PodView | undefined;
    await eventually(
      () => {
        first = [...pods.live.values()].find((x) => x.status?.phase === "Running");
        return Promise.resolve(first !== undefined);
      },
      60_000,
      `the task pod of ${c.pool}-000 to run`,
    );
    const deleted = await cluster.kubectl([
      ...["delete", "pod", first!.metadata.name, "-n", ns],
      ...["--grace-period=30", "--wait=false"],
    ]);
    assert.equal(deleted.code, 0, deleted.stderr);
    // The replacement runs once the first pod is gone; the Job then succeeds.
    const r = await p.ended;
    await pods.stop();
    assert.ok(!r.timedOut, `the dispatcher hung:\n${r.stderr}`);
    assert.equal(r.code, 0, r.stderr);
    const job = JSON.parse(
      (await cluster.kubectl(["get", "jobs", "-n", ns, "-o", "json"])).stdout,
    ).items[0];
    assert.equal(job.status.failed, 1, "the deleted pod counted as one failure");
    if (c.overlap) {
      assert.equal(job.spec.podReplacementPolicy, "TerminatingOrFailed");
      assert.ok(
        pods.overlaps.length > 0,
        `the control starts a second pod at once:\n${pods.log.join("\n")}`,
      );
      assert.match(r.stderr, /podReplacementPolicy: TerminatingOrFailed starts a replacement pod/);
    } else {
      assert.deepEqual(
        pods.overlaps,
        [],
        `no second pod before the first ended:\n${pods.log.join("\n")}`,
      );
      assert.equal(job.spec.podReplacementPolicy, "Failed");
      assert.doesNotMatch(r.stderr, /podReplacementPolicy/);
    }
    await t.step(`${c.pool}: ${c.overlap ? pods.overlaps[0] : "one pod at a time"}`, () => {});
  }));
}

/**
 * A run SIGKILLed while a node's post-success work waits for the node to be
 * Ready, after it kept the success on the node; the Job's TTL (5 s) removes
 * the Job; the re-run counts the success, labels the node, removes the mark
 * and creates no second Job.
 */
export async function keptAcrossKill(cluster: Cluster): Promise<void> {
  const ns = "op-kept";
  const pool = "kept";
  const node = `${pool}-000`;
  const key = "onepod.e2e.io/kept";
  const kubeconfig = await place(cluster, ns);
  await cluster.createNodes(nodes(pool, 1));
  const tpl = await tempFile(
    jobTemplate(pool, "2s").replace("spec:\n", "spec:\n  ttlSecondsAfterFinished: 5\n"),
  );
  const args = [
    ...["--job-template", tpl, "-n", ns, "--node-selector", `${SUITE}=${pool}`],
    ...["--node-label-key", key, "--node-label", "true", "--wait-node-ready-secs", "300"],
  ];
  const annotations = async () =>
    JSON.parse((await cluster.kubectl(["get", "node", node, "-o", "json"])).stdout).metadata
      .annotations ?? {};
  const labels = async () =>
    JSON.parse((await cluster.kubectl(["get", "node", node, "-o", "json"])).stdout).metadata
      .labels ?? {};
  const jobs = await JobWatcher.start(cluster, ns);
  const p = new DispatcherProcess(cluster, args, { kubeconfig, timeoutMs: 150_000 });
  await eventually(async () => (await jobsIn(cluster, ns)).length === 1, 60_000, "its Job");
  // The post-success work waits for Ready: the run is killed in it.
  await cluster.setNodeReady(node, false);
  const kept = async () => Object.keys(await annotations()).filter((k) => k.startsWith(KEPT));
  await eventually(async () => (await kept()).length > 0, 60_000, "the success kept on the node");
  p.kill("SIGKILL");
  await p.ended;
  assert.equal((await labels())[key], undefined, "the post-success work had not ended");
  await eventually(async () => (await jobsIn(cluster, ns)).length === 0, 60_000, "the TTL");
  await cluster.setNodeReady(node, true);
  const r = await runDispatcher(cluster, args, { kubeconfig, timeoutMs: 120_000 });
  await jobs.stop();
  assert.ok(!r.timedOut, `the re-run hung:\n${r.stderr}`);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(jobs.seen.size, 1, `one Job over both runs:\n${r.stderr}`);
  assert.equal((await jobsIn(cluster, ns)).length, 0, "no second Job");
  assert.equal((await labels())[key], "true", "the re-run did the post-success work");
  assert.deepEqual(await kept(), [], "and removed the mark");
}
