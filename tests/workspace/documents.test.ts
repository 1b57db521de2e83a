import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { repositoryFiles, ROOT } from "../support/repo-files.js";

/**
 * The README is a front page (CONTRIBUTING.md, Habits 14): at most 250 lines, with the two
 * commands, the quick start and a map of docs/. Every relative link of the repository's Markdown
 * leads to a file that exists, and every `#anchor` to a heading of it.
 */
const markdown = repositoryFiles().filter((file) => file.endsWith(".md"));

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens. */
const anchorOf = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, "")
    .replace(/ /g, "-");

function anchors(file: string): Set<string> {
  const text = readFileSync(path.join(ROOT, file), "utf8").replace(/^```[\s\S]*?^```$/gm, "");
  return new Set([...text.matchAll(/^#{1,6} (.+)$/gm)].map((m) => anchorOf(m[1])));
}

test("the README is a front page: at most 250 lines, the two commands, a map of docs/", () => {
  const readme = readFileSync(path.join(ROOT, "README.md"), "utf8");
  expect(readme.split("\n").length).toBeLessThanOrEqual(250);
  expect(readme).toContain("npm ci && npm run demo");
  expect(readme).toContain("npm ci && npm test");
  for (const page of [
    "docs/api.md",
    "docs/receivers.md",
    "docs/configuration.md",
    "docs/operations.md",
    "docs/security.md",
    "docs/scheduler.md",
    "docs/dashboard.md",
  ])
    expect([page, readme.includes(`](${page})`)]).toEqual([page, true]);
});

test("every relative link of the Markdown files leads to a file and a heading that exist", () => {
  const broken: string[] = [];
  for (const file of markdown) {
    const text = readFileSync(path.join(ROOT, file), "utf8").replace(/^```[\s\S]*?^```$/gm, "");
    for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(target)) continue;
      const [where, anchor] = target.split("#");
      const linked = where === "" ? file : path.posix.normalize(path.posix.join(path.posix.dirname(file), where));
      if (!existsSync(path.join(ROOT, linked))) broken.push(`${file}: ${target} (no ${linked})`);
      else if (anchor && linked.endsWith(".md") && !anchors(linked).has(anchor)) broken.push(`${file}: ${target} (no heading #${anchor})`);
    }
  }
  expect(broken).toEqual([]);
});
