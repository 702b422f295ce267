// Unit tests of `deno task cluster hook`'s pure parts: the command line, and
// the hook container's arguments rewritten for a run on this machine.
// Run: deno test --allow-all e2e/_hook_test.ts

import assert from "node:assert/strict";
import { parseArgs } from "./_cli.ts";
import { hookCommandLine, localHook } from "./_hook.ts";

Deno.test("cluster hook: the command line", async (t) => {
  const cases: [string[], { release?: string; namespace?: string; error?: RegExp }][] = [
    [["hook", "kata", "-n", "kata-system"], { release: "kata", namespace: "kata-system" }],
    [["hook", "--namespace=ops", "audit"], { release: "audit", namespace: "ops" }],
    [["hook", "kata"], { release: "kata", namespace: "default" }],
    [["hook"], { error: /name the Helm release/ }],
    [["hook", "a", "b"], { error: /unexpected "b"/ }],
    [["up", "kata"], { error: /unexpected "kata"/ }],
  ];
  for (const [args, want] of cases) {
    await t.step(args.join(" "), () => {
      if (want.error) {
        assert.throws(() => parseArgs(args, "/d"), want.error);
        return;
      }
      const o = parseArgs(args, "/d");
      assert.equal(o.command, "hook");
      assert.equal(o.release, want.release);
      assert.equal(o.namespace, want.namespace);
    });
  }
});

Deno.test("cluster hook: mount paths become local directories, $(POD_NAME) the hook pod", () => {
  const job = {
    spec: {
      template: {
        spec: {
          containers: [{
            args: [
              "--job-template=/etc/job-dispatcher/job.yaml",
              "--verify-job-template=/etc/job-dispatcher/verify-job.yaml",
              "--gate-bearer-token-file=/var/run/secrets/job-dispatcher/gate-token/token",
              "--owner-job-from-pod=$(POD_NAME)",
              "--node-selector=a=/etc/job-dispatcher/x",
              "--parallelism=10",
            ],
            env: [{ name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } }],
          }],
        },
      },
    },
  };
  const { args, env } = localHook(job, {
    "/etc/job-dispatcher": "/tmp/a",
    "/var/run/secrets/job-dispatcher/gate-token": "/tmp/b",
  }, "hook-r1-xyz");
  assert.deepEqual(args, [
    "--job-template=/tmp/a/job.yaml",
    "--verify-job-template=/tmp/a/verify-job.yaml",
    "--gate-bearer-token-file=/tmp/b/token",
    "--owner-job-from-pod=hook-r1-xyz",
    // Only a flag's whole value is a path: a selector that mentions one is left alone.
    "--node-selector=a=/etc/job-dispatcher/x",
    "--parallelism=10",
  ]);
  assert.deepEqual(env, { POD_NAME: "hook-r1-xyz" });
});

Deno.test("cluster hook: $$(VAR) stays $(VAR), as the kubelet escapes it; $(UNSET) stays as written", () => {
  const cases: [string, string][] = [
    ["--owner-job-from-pod=$(POD_NAME)", "--owner-job-from-pod=hook-r1-xyz"],
    ["--node-selector=x=$$(POD_NAME)", "--node-selector=x=$(POD_NAME)"],
    ["--node-selector=x=$$$(POD_NAME)", "--node-selector=x=$hook-r1-xyz"],
    ["--node-selector=x=$(UNSET)", "--node-selector=x=$(UNSET)"],
    ["--node-selector=x=$$", "--node-selector=x=$"],
  ];
  for (const [arg, want] of cases) {
    const job = {
      spec: {
        template: {
          spec: {
            containers: [{
              args: [arg],
              env: [{ name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } }],
            }],
          },
        },
      },
    };
    assert.deepEqual(localHook(job, {}, "hook-r1-xyz").args, [want], arg);
  }
});

Deno.test("cluster hook: the printed command line quotes each argument for sh", async () => {
  const args = [
    "--window=Sat,Sun 01:00-05:00 Europe/Berlin",
    "--node-selector=x=$(POD_NAME)",
    "--name-prefix=it's",
    "--parallelism=10",
    "",
  ];
  const line = hookCommandLine(args);
  assert.match(line, /^job-dispatcher /);
  // sh reads the line back into the same words: printf prints one a line.
  const out = await new Deno.Command("sh", {
    args: ["-c", `set -- ${line.slice("job-dispatcher ".length)}; printf '%s\\n' "$@"`],
  }).output();
  assert.equal(new TextDecoder().decode(out.stdout), args.map((a) => `${a}\n`).join(""));
});
