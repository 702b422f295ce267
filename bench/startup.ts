/**
 * `deno task bench:startup`: warm start of the dispatcher without a cluster,
 * spawn → first TCP connection and spawn → first HTTP request at a local
 * HTTPS listener that stands in for the API server (its own CA, a bearer
 * token or a client certificate, as a kubeconfig names them).
 *
 * ```sh
 * deno task bench:startup                         # the bundle, rebuilt; 10 runs after one warm-up
 * deno task bench:startup --runs 20 --user cert   # client-certificate user
 * deno task bench:startup --user fallback         # an impersonating user (impersonation headers)
 * JOB_DISPATCHER_ENTRY=main.ts deno task bench:startup
 * ```
 *
 * Each run is `--job-template T --nodes n1 --dry-run=client --kubeconfig K`,
 * the bench's startup probe; the listener answers 404, so the run ends right
 * after its first request. The dispatcher runs with the `dispatch` task's
 * permissions and V8 flags from a folder of its own (no deno.json there), as
 * `deno task bench` runs it. It never gates on time: it measures and prints.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { dispatcherCommand } from "../e2e/_dispatcher.ts";
import { percentile } from "./_analysis.ts";
import { FirstConnectProxy, run, stageEntry } from "./_measure.ts";

const ROOT = new URL("../", import.meta.url).pathname;

/** Which kubeconfig user the probe runs as. */
type UserKind = "token" | "cert" | "fallback";

/** A CA, a server certificate for 127.0.0.1 and a client certificate, made with openssl. */
async function pki(dir: string): Promise<void> {
  const ssl = (...args: string[]) => run("openssl", args, dir);
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
  await ssl(
    "req",
    "-x509",
    ...ec,
    "-days",
    "2",
    "-subj",
    "/CN=probe-ca",
    "-keyout",
    "ca.key",
    "-out",
    "ca.crt",
  );
  await Deno.writeTextFile(`${dir}/server.ext`, "subjectAltName=IP:127.0.0.1\n");
  await Deno.writeTextFile(`${dir}/client.ext`, "extendedKeyUsage=clientAuth\n");
  for (const name of ["server", "client"]) {
    await ssl(
      "req",
      ...ec,
      "-subj",
      `/CN=${name}`,
      "-keyout",
      `${name}.key`,
      "-out",
      `${name}.csr`,
    );
    await ssl(
      "x509",
      "-req",
      "-in",
      `${name}.csr`,
      "-CA",
      "ca.crt",
      "-CAkey",
      "ca.key",
      "-CAcreateserial",
      "-days",
      "2",
      "-out",
      `${name}.crt`,
      "-extfile",
      `${name}.ext`,
    );
  }
}

function kubeconfig(dir: string, server: string, user: UserKind): string {
  const b64 = (file: string) => btoa(Deno.readTextFileSync(`${dir}/${file}`));
  const users = {
    token: `{token: probe-token}`,
    cert: `{client-certificate-data: ${b64("client.crt")}, client-key-data: ${b64("client.key")}}`,
    // Impersonation went to client-node's KubeConfig until kube/credentials.ts
    // took it over; kept to show that it no longer costs a start anything.
    fallback: `{token: probe-token, as: someone}`,
  };
  return `apiVersion: v1
kind: Config
clusters: [{name: probe, cluster: {server: "${server}", certificate-authority-data: ${
    b64("ca.crt")
  }}}]
users: [{name: probe, user: ${users[user]}}]
contexts: [{name: probe, context: {cluster: probe, user: probe, namespace: probe}}]
current-context: probe
`;
}

/** One probe run: when the first connection and the first request arrived, ms after spawn. */
interface Probe {
  firstConnectMs: number;
  firstRequestMs: number;
  exitCode: number;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      runs: { type: "string", default: "10" },
      user: { type: "string", default: "token" },
    },
  });
  const runs = Number(values.runs);
  const user = values.user as UserKind;
  if (!["token", "cert", "fallback"].includes(user)) {
    throw new TypeError(`Invalid --user ${user}: expected token, cert or fallback`);
  }
  const dir = await Deno.makeTempDir({ prefix: "job-dispatcher-startup-" });
  try {
    const entry = await stageEntry(dir, console.error);
    await pki(dir);

    let requestAt: number | undefined;
    let auth = "";
    const server = Deno.serve({
      hostname: "127.0.0.1",
      port: 0,
      cert: Deno.readTextFileSync(`${dir}/server.crt`),
      key: Deno.readTextFileSync(`${dir}/server.key`),
      onListen: () => {},
    }, (request) => {
      requestAt ??= Date.now();
      auth ||= request.headers.get("authorization") ?? "(none)";
      return Response.json(
        { kind: "Status", code: 404, reason: "NotFound", message: "probe" },
        { status: 404 },
      );
    });
    await Deno.writeTextFile(
      `${dir}/job.yaml`,
      `apiVersion: batch/v1
kind: Job
metadata: {name: probe}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: registry.invalid/c:1}]
`,
    );
    const args = [
      ...dispatcherCommand(),
      "--job-template",
      "job.yaml",
      "--nodes",
      "node-00000",
      "--dry-run=client",
      "--kubeconfig",
      "probe.kubeconfig",
    ];
    const loadBefore = Deno.readTextFileSync("/proc/loadavg").split(" ").slice(0, 3).join(" ");
    const probes: Probe[] = [];
    for (let i = 0; i <= runs; i++) {
      requestAt = undefined;
      // The bench's pass-through proxy notes the first TCP connection.
      const proxy = new FirstConnectProxy(`https://127.0.0.1:${server.addr.port}`);
      await Deno.writeTextFile(`${dir}/probe.kubeconfig`, kubeconfig(dir, proxy.url, user));
      const spawnAt = Date.now();
      const out = await new Deno.Command(Deno.execPath(), {
        args,
        cwd: dir,
        env: { NO_COLOR: "1" },
        stdin: "null",
        stdout: "null",
        stderr: "piped",
      }).output();
      await proxy.close();
      // The first run warms the caches and is not counted.
      if (i === 0) {
        const stderr = new TextDecoder().decode(out.stderr).trim();
        console.error(`warm-up: exit ${out.code}: ${stderr.split("\n").at(-1)}`);
        continue;
      }
      probes.push({
        firstConnectMs: (proxy.firstConnectAt ?? NaN) - spawnAt,
        firstRequestMs: (requestAt ?? NaN) - spawnAt,
        exitCode: out.code,
      });
    }
    const loadAfter = Deno.readTextFileSync("/proc/loadavg").split(" ").slice(0, 3).join(" ");
    await server.shutdown();
    const list = (xs: number[]) => xs.map((x) => Math.round(x)).join(", ");
    const connects = probes.map((p) => p.firstConnectMs);
    const requests = probes.map((p) => p.firstRequestMs);
    const entryName = entry.startsWith(dir)
      ? `bundle (${Deno.statSync(entry).size} bytes)`
      : entry.replace(ROOT, "");
    console.log(
      [
        `entry: ${entryName}; user: ${user} (Authorization seen: ${
          auth.startsWith("Bearer") ? "Bearer …" : auth
        }); ${runs} runs after one warm-up; exit codes ${[
          ...new Set(probes.map((p) => p.exitCode)),
        ]}`,
        `load average before / after: ${loadBefore} / ${loadAfter}; ${navigator.hardwareConcurrency} CPUs; deno ${Deno.version.deno}`,
        `spawn → first connection, ms: ${list(connects)} (median ${
          Math.round(percentile(connects, 50))
        })`,
        `spawn → first request, ms: ${list(requests)} (median ${
          Math.round(percentile(requests, 50))
        })`,
      ].join("\n"),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

if (import.meta.main) {
  try {
    await main();
  } catch (e) {
    console.error(`bench:startup: ${(e as Error).message}`);
    Deno.exit(1);
  }
}
