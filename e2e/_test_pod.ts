/**
 * A kubelet stand-in for one `helm test` Pod on the e2e control plane.
 *
 * kwok fakes the pods of its nodes without running them: a test Pod it ran
 * would pass whatever its command said. A Pod annotated with
 * {@linkcode RUN_HERE} matches no kwok stage (e2e/stages/pod.yaml) and keeps
 * the outcomes controller off it, so it stays Pending once the scheduler bound
 * it; {@linkcode playTestPod} then does what that node's kubelet would: runs
 * the Pod's container arguments with the dispatcher of this checkout, as the
 * Pod's ServiceAccount (a token of it, from the API server), writes the exit
 * code as the Pod's phase and container state through the status subresource,
 * and serves the output as the container's log behind the API server's node
 * proxy (what `kubectl logs` and `helm test --logs` read).
 *
 * Real: the Pod Helm created and the API server admitted, its ServiceAccount
 * and RBAC, its arguments, the dispatcher, the API server, Helm's wait on the
 * Pod's phase and its log request. Not real: no container runtime (the
 * command runs as a process of this machine, not in the image).
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Cluster, CommandResult } from "./cluster.ts";
import { dispatcher, eventually } from "./_dispatcher.ts";
import { serviceAccountKubeconfig } from "./_helm.ts";
import { OUTCOME_LABEL } from "./_nodes.ts";

/** The pod annotation that leaves a Pod to {@linkcode playTestPod} instead of kwok. */
export const RUN_HERE: Record<string, string> = { [OUTCOME_LABEL]: "run-here" };

/** A test Pod being played: how its command ended, and the log server to stop. */
export interface PlayedPod {
  /** Resolves when the Pod's phase is written: its command's exit code and output. */
  done: Promise<{ code: number; log: string }>;
  /** Stops the log server. */
  close(): Promise<void>;
}

/** This machine's own IPv4 address: the API server proxies to no loopback address. */
function ownAddress(): string {
  const address = Deno.networkInterfaces().find((i) =>
    i.family === "IPv4" && !i.address.startsWith("127.") && !i.address.startsWith("169.254.")
  )?.address;
  assert.ok(address, "this machine has no non-loopback IPv4 address for the fake kubelet");
  return address;
}

/** Runs kubectl, asserting exit 0; returns its stdout. */
async function kubectl(cluster: Cluster, args: string[]): Promise<string> {
  const r = await cluster.kubectl(args);
  assert.equal(r.code, 0, `kubectl ${args.join(" ")}: ${r.stderr}`);
  return r.stdout;
}

// deno-lint-ignore no-explicit-any
type Obj = Record<string, any>;

/** The Pod's terminal status, as a kubelet writes it for a container that exited `code`. */
function terminatedStatus(pod: Obj, r: CommandResult, log: string) {
  const now = new Date().toISOString();
  const c = pod.spec.containers[0];
  return {
    status: {
      phase: r.code === 0 ? "Succeeded" : "Failed",
      startTime: now,
      containerStatuses: [{
        name: c.name,
        image: c.image,
        imageID: "",
        ready: false,
        restartCount: 0,
        state: {
          terminated: {
            exitCode: r.code,
            reason: r.code === 0 ? "Completed" : "Error",
            // terminationMessagePolicy FallbackToLogsOnError: the log's tail.
            ...(r.code !== 0 && c.terminationMessagePolicy === "FallbackToLogsOnError"
              ? { message: log.slice(-2048) }
              : {}),
            startedAt: now,
            finishedAt: now,
          },
        },
      }],
    },
  };
}

/**
 * Plays the kubelet for Pod `name` of `ns`: waits until it is bound, runs its
 * container's arguments as its ServiceAccount, serves their output as its
 * log, and writes its phase. Start it before `helm test`, which creates the
 * Pod.
 */
export function playTestPod(cluster: Cluster, ns: string, name: string): PlayedPod {
  let log = "";
  const tls = {
    cert: Deno.readTextFileSync(new URL("./testdata/kubelet.crt", import.meta.url)),
    key: Deno.readTextFileSync(new URL("./testdata/kubelet.key", import.meta.url)),
  };
  const address = ownAddress();
  // The kubelet's log endpoint: /containerLogs/NAMESPACE/POD/CONTAINER.
  const server = Deno.serve(
    { port: 0, hostname: address, ...tls, onListen: () => {} },
    (req) =>
      new URL(req.url).pathname.startsWith(`/containerLogs/${ns}/${name}/`)
        ? new Response(log)
        : new Response("not found", { status: 404 }),
  );
  const done = (async () => {
    let pod: Obj | undefined;
    await eventually(
      async () => {
        const r = await cluster.kubectl(["get", "pod", name, "-n", ns, "-o", "json"]);
        pod = r.code === 0 ? JSON.parse(r.stdout) : undefined;
        // Pending: not the last test's Pod, ended, that Helm is about to replace.
        return Boolean(pod?.spec?.nodeName) && pod?.status?.phase === "Pending";
      },
      120_000,
      `test pod ${ns}/${name} to be bound`,
    );
    const kubeconfig = await serviceAccountKubeconfig(cluster, ns, pod!.spec.serviceAccountName);
    const r = await dispatcher(cluster, pod!.spec.containers[0].args, {
      env: { KUBECONFIG: kubeconfig },
    });
    log = r.stdout + r.stderr;
    // The node now points the API server at this kubelet, as a real one's
    // status points at itself.
    const endpoint = {
      status: {
        addresses: [{ type: "InternalIP", address }],
        daemonEndpoints: { kubeletEndpoint: { Port: server.addr.port } },
      },
    };
    await kubectl(cluster, [
      ...["patch", "node", pod!.spec.nodeName, "--subresource=status", "--type=merge"],
      ...["-p", JSON.stringify(endpoint)],
    ]);
    await kubectl(cluster, [
      ...["patch", "pod", name, "-n", ns, "--subresource=status", "--type=merge"],
      ...["-p", JSON.stringify(terminatedStatus(pod!, r, log))],
    ]);
    return { code: r.code, log };
  })();
  return { done, close: () => server.shutdown() };
}
