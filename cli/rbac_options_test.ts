import assert from "node:assert/strict";
import { UsageError } from "../job.ts";
import { parseRbacOptions } from "./rbac_options.ts";

Deno.test({
  name: "parseRbacOptions() takes its own flags and refuses bad run flags with the run's errors",
  permissions: "none",
  async fn(t) {
    const ok: [string, string[], Partial<ReturnType<typeof parseRbacOptions>>][] = [
      ["run flags", ["--job-template", "t.yaml"], {
        viewer: false,
        serviceAccount: "job-dispatcher",
      }],
      [
        "--service-account NAME",
        ["--service-account", "upg", "--job-template", "t.yaml", "--drain"],
        { viewer: false, serviceAccount: "upg" },
      ],
      [
        "--viewer with -n",
        ["--viewer", "-n", "ops"],
        { viewer: true, serviceAccount: "job-dispatcher-viewer" },
      ],
      ["--viewer with --service-account=", ["--viewer", "--service-account=oncall"], {
        viewer: true,
        serviceAccount: "oncall",
      }],
      ["a dotted account name", ["--viewer", "--service-account=on-call.ops"], {
        viewer: true,
        serviceAccount: "on-call.ops",
      }],
      ["--required-only", ["--required-only", "--job-template", "t"], { requiredOnly: true }],
      ["--required-only=false", ["--required-only=false", "--job-template", "t"], {
        requiredOnly: false,
      }],
      ["default: every need", ["--job-template", "t"], { requiredOnly: false }],
    ];
    for (const [what, argv, want] of ok) {
      await t.step(what, () => {
        const got = parseRbacOptions(argv);
        for (const k of ["viewer", "serviceAccount", "requiredOnly"] as const) {
          if (k in want) assert.equal(got[k], want[k]);
        }
      });
    }
    const bad: [string, string[], RegExp][] = [
      ["a mistyped run flag", ["--job-template", "t.yaml", "--drian"], /^Unknown flag --drian/],
      ["no template", ["--drain"], /^Missing --job-template/],
      [
        "a run flag with --viewer",
        ["--viewer", "--drain"],
        /^Invalid argument --drain with --viewer/,
      ],
      [
        "--required-only with a bad value",
        ["--required-only=yes", "--job-template", "t"],
        /^Invalid --required-only=yes: it takes =true or =false/,
      ],
      [
        "--required-only with --viewer (whose reads are all required)",
        ["--viewer", "--required-only"],
        /^Invalid argument --required-only with --viewer/,
      ],
      [
        "a bad account name",
        ["--service-account", "Upg", "--job-template", "t"],
        /^Invalid --service-account "Upg"/,
      ],
      // A DNS-1123 subdomain is dot-separated labels, each starting and ending
      // with a letter or digit: the API server (kubectl apply) refuses these.
      ...["a..b", "a.-b", "a-.b", ".a", "a.", `${"a".repeat(254)}`].map((
        name,
      ): [string, string[], RegExp] => [
        `the account ${name.length > 20 ? "of 254 characters" : name}`,
        ["--service-account", name, "--job-template", "t"],
        /^Invalid --service-account "/,
      ]),
    ];
    for (const [what, argv, want] of bad) {
      await t.step(what, () => {
        assert.throws(
          () => parseRbacOptions(argv),
          (e) => e instanceof UsageError && want.test(e.message),
        );
      });
    }
  },
});
