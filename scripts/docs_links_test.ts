/**
 * The README is a page and a map; the manual lives in docs/. These tests keep
 * the map whole: every page of docs/ is reachable from the README, and every
 * relative link of the README and of docs/ lands on a file (and, for a
 * Markdown file, on a heading of it). Other pages join docs/ over time, so
 * the tests read the folder as it is, not a list.
 */
import assert from "node:assert/strict";
import { dirname, join, normalize, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { anchors, links } from "./docs_links.ts";

const ROOT = normalize(join(dirname(fileURLToPath(import.meta.url)), ".."));

/** Every Markdown page of docs/, as a path relative to the repository. */
function docsPages(): string[] {
  return [...Deno.readDirSync(join(ROOT, "docs"))]
    .filter((e) => e.isFile && e.name.endsWith(".md"))
    .map((e) => `docs/${e.name}`)
    .sort();
}

function exists(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
}

Deno.test({
  name: "every page of docs/ is linked from README.md",
  permissions: { read: true },
  fn() {
    const readme = Deno.readTextFileSync(join(ROOT, "README.md"));
    const linked = new Set(
      links(readme).map((l) => l.path).filter((p) => p).map((p) => normalize(p)),
    );
    const missing = docsPages().filter((p) => !linked.has(p));
    assert.deepEqual(missing, [], "README.md links every page of docs/ (its Documentation table)");
  },
});

Deno.test({
  name: "every relative link of README.md and docs/ resolves to a file and a heading",
  permissions: { read: true },
  async fn(t) {
    for (const page of ["README.md", ...docsPages()]) {
      await t.step(page, () => {
        const file = join(ROOT, page);
        const text = Deno.readTextFileSync(file);
        const bad: string[] = [];
        for (const l of links(text)) {
          const target = l.path ? join(dirname(file), l.path) : file;
          if (!exists(target)) {
            bad.push(`${l.raw}: no file ${relative(ROOT, target)}`);
            continue;
          }
          if (l.anchor && target.endsWith(".md")) {
            const heads = anchors(Deno.readTextFileSync(target));
            if (!heads.has(l.anchor)) bad.push(`${l.raw}: no heading #${l.anchor}`);
          }
        }
        assert.deepEqual(bad, [], `${page} has links that lead nowhere`);
      });
    }
  },
});

Deno.test({
  name: "README.md keeps the quick start's test command CI and a new user run",
  permissions: { read: true },
  fn() {
    const readme = Deno.readTextFileSync(join(ROOT, "README.md"));
    const ci = Deno.readTextFileSync(join(ROOT, ".ci/run"));
    const version = ci.match(/^DENO_VERSION=(\S+)$/m)?.[1];
    assert.ok(version, ".ci/run pins DENO_VERSION");
    assert.ok(readme.includes(`npx -y deno@${version} task demo`), "the README's demo command");
    assert.ok(readme.includes(`npx -y deno@${version} task test`), "the README's test command");
    assert.ok(ci.includes("deno task test "), ".ci/run runs the test task the README names");
  },
});
