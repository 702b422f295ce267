/**
 * `deno task demo`: brings up the local control plane with 20 simulated nodes
 * (three tainted, one whose Job fails), rolls a Job out over them with
 * `--parallelism 4` in plain view, and tears everything down.
 *
 * @module
 */

import { type NodeSpec, OUTCOME_LABEL, startCluster } from "./cluster.ts";
import { dispatcherCommand, jobTemplate } from "./_dispatcher.ts";

const ROOT = new URL("../", import.meta.url).pathname;

function say(text: string): void {
  console.log(`\n\x1b[1m== ${text}\x1b[0m`);
}

if (import.meta.main) {
  say("starting a local control plane (etcd, kube-apiserver, controllers, scheduler, kwok)");
  const cluster = await startCluster();
  let code = 1;
  try {
    const specs: NodeSpec[] = Array.from({ length: 20 }, (_, i) => ({
      name: `worker-${String(i).padStart(2, "0")}`,
      labels: {
        "node-role.kubernetes.io/worker": "",
        ...(i === 13 ? { [OUTCOME_LABEL]: "fail" } : {}),
      },
      taints: i >= 17 ? [{ key: "dedicated", value: "infra", effect: "NoSchedule" }] : [],
    }));
    await cluster.createNodes(specs);
    say("20 nodes: worker-17..19 are tainted dedicated=infra:NoSchedule, worker-13 will fail");
    const template = `${cluster.dir}/upgrade.yaml`;
    await Deno.writeTextFile(template, jobTemplate("upgrade", "2s"));
    const args = [
      "--job-template",
      template,
      "--node-selector",
      "node-role.kubernetes.io/worker",
      "--parallelism",
      "4",
      "--progress-interval-secs",
      "2",
    ];
    say(`job-dispatcher ${args.join(" ")}`);
    const status = await new Deno.Command(Deno.execPath(), {
      args: [...dispatcherCommand(), ...args],
      cwd: ROOT,
      env: { KUBECONFIG: cluster.kubeconfig },
      stdout: "inherit",
      stderr: "inherit",
    }).output();
    say(`job-dispatcher exited ${status.code} (1: a node failed, as planned)`);
    const jobs = await cluster.kubectl(["get", "jobs"]);
    say("kubectl get jobs");
    console.log(jobs.stdout);
    code = status.code === 1 ? 0 : 1;
  } finally {
    say("tearing the control plane down");
    await cluster.stop({ removeDir: true });
  }
  Deno.exit(code);
}
