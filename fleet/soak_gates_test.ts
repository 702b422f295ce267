import assert from "node:assert/strict";
import { Logger } from "../report/log.ts";
import type { RunConfig } from "../run/config.ts";
import { status, withServer } from "../testing/loopback.ts";
import { openSoakGates } from "./soak_gates.ts";

/** A loopback Prometheus: `answer()` for the gate's query; every selector is in data. */
async function withPrometheus(
  answer: () => number | undefined,
  fn: (url: string) => Promise<void>,
): Promise<void> {
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (req) => {
    const selector = new URL(req.url).searchParams.get("query")?.includes("gate_selector");
    const v = selector ? 1 : answer();
    const result = v === undefined
      ? []
      : [{ metric: { gate_selector: "0" }, value: [1, String(v)] }];
    return Response.json({ status: "success", data: { resultType: "vector", result } });
  });
  try {
    await fn(`http://127.0.0.1:${server.addr.port}`);
  } finally {
    await server.shutdown();
  }
}

function member(url: string, kube: Parameters<typeof openSoakGates>[0][0]["kube"], o: {
  onBreach: "pause" | "exit";
  pauseFile?: string;
}) {
  const cfg = {
    gate: { url, queries: ["bad > 0"], intervalSecs: 1, onBreach: o.onBreach },
    maintenance: { pauseFile: o.pauseFile },
    trackingLabelPrefix: "job-dispatcher",
  } as unknown as RunConfig;
  return { name: "a", cfg, kube, key: { namespace: "ops", prefix: "drv" } };
}

const exists = (path: string) => {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
};

async function until(ready: () => boolean, what: string, ms = 5_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!ready()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

Deno.test("openSoakGates latches a breach on the pause file; lifted, clean again from after the lift", async () => {
  const dir = await Deno.makeTempDir();
  const pauseFile = `${dir}/pause`;
  let value: number | undefined;
  const lines: string[] = [];
  await withPrometheus(() => value, async (url) => {
    await withServer(() => status(404, "NotFound"), async (kube) => {
      const gates = await openSoakGates(
        [member(url, kube, { onBreach: "pause", pauseFile })],
        new Logger("text", (l) => lines.push(l)),
        exists,
      );
      try {
        assert.deepEqual(gates.watch(), { clean: true, since: -Infinity }, "clean from the start");
        value = 2;
        await until(() => !gates.watch().clean, "the breach");
        const w = gates.watch();
        assert.ok(!w.clean && /^cluster a: health gate breached: query "bad > 0"/.test(w.why));
        await until(() => exists(pauseFile), "the latch");
        assert.equal(gates.stopsBy(), undefined, "a pause holds; it does not stop the fleet");
        value = undefined; // recovered: the latch still holds
        await new Promise((r) => setTimeout(r, 1_200));
        assert.equal(gates.watch().clean, false, "latched while the pause file is there");
        await Deno.remove(pauseFile);
        const lifted = Date.now();
        await until(() => gates.watch().clean, "clean after the lift");
        const after = gates.watch();
        assert.ok(after.clean && after.since >= lifted, "the clean stretch starts after the lift");
        assert.match(after.clean ? after.after ?? "" : "", /^cluster a: /);
        assert.ok(lines.some((l) => /cluster a: health gate breached in the soak/.test(l)));
      } finally {
        await gates.stop();
      }
    });
  });
  await Deno.remove(dir, { recursive: true });
});

Deno.test("openSoakGates with --on-gate-breach exit: a breach writes the exit latch and stops the fleet, naming the cluster", async () => {
  let posted = "";
  await withPrometheus(() => 2, async (url) => {
    await withServer(
      (req, _n, body) => {
        if (req.method !== "POST") return status(404, "NotFound");
        posted = (body as { metadata: { name: string } }).metadata.name;
        return Response.json(body, { status: 201 });
      },
      async (kube) => {
        const gates = await openSoakGates(
          [member(url, kube, { onBreach: "exit" })],
          new Logger("text", () => {}),
          exists,
        );
        try {
          const stop = gates.stopsBy();
          assert.equal(stop?.cluster, "a");
          assert.match(stop!.cause, /a health gate was breached: query "bad > 0" returned/);
          assert.equal(posted, "drv-gate-breach");
        } finally {
          await gates.stop();
        }
      },
    );
  });
});

Deno.test("openSoakGates stops at once on an exit latch an earlier breach left, naming how to clear it", async () => {
  await withServer(
    (req) =>
      new URL(req.url).pathname === "/api/v1/namespaces/ops/configmaps/drv-gate-breach"
        ? Response.json({ data: { breach: 'query "bad > 0" returned {} 2' } })
        : status(404, "NotFound"),
    async (kube) => {
      const gates = await openSoakGates(
        [member("http://127.0.0.1:1", kube, { onBreach: "exit" })],
        new Logger("text", () => {}),
        exists,
      );
      const stop = gates.stopsBy();
      assert.equal(stop?.cluster, "a");
      assert.match(stop!.cause, /kubectl delete configmap -n ops drv-gate-breach/);
      await gates.stop();
    },
  );
});
