import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import ts from "typescript";
import { ALONE_FILES, INTEGRATION_SUFFIX, STACK_FOLDERS } from "../../jest.config.js";
import { repositoryFiles, ROOT as root } from "../support/repo-files.js";

/**
 * The run-alone rule (CONTRIBUTING.md, "Tests in two tiers"): a test file that asserts a time or
 * memory bound runs alone on the machine, in ALONE_FILES of jest.config.ts, which `npm test` and
 * `npm run test:unit` run one at a time after every other file of the run. A name there that no
 * longer exists (a file renamed) would let its tests run beside others unnoticed; a file that
 * asserts a duration and is not there fails beside a busy neighbour.
 */

test("every file that must run alone exists and is a test file of one of the tiers", () => {
  expect(ALONE_FILES.length).toBeGreaterThan(0);
  for (const file of ALONE_FILES) {
    expect([file, existsSync(path.join(root, file))]).toEqual([file, true]);
    const tierName = file.endsWith(".test.ts") && !file.includes("/node_modules/");
    expect([file, tierName]).toEqual([file, true]);
  }
  expect(new Set(ALONE_FILES).size).toBe(ALONE_FILES.length);
});

/** A reading of the clock or of a process's memory, in the text of an expression. */
const CLOCK = /Date\.now\(\)|performance\.now\(\)|process\.hrtime|\.getTime\(\)|Date\.parse\(/;
const MEMORY = /memoryUsage|\b(rss|heapUsed|arrayBuffers)\b/;
const DURATION = /\bduration_ms\b|\bdurationMs\b/;
const ORDER_MATCHERS = new Set(["toBeLessThan", "toBeLessThanOrEqual", "toBeGreaterThan", "toBeGreaterThanOrEqual", "toBeCloseTo"]);

/**
 * Where `source` asserts a time or memory bound: `expect(x).toBeLessThan(...)` and the like, where
 * `x` is a difference of which one side reads the clock (directly, or through a variable that
 * holds a reading or a difference of readings), a recorded duration, or a memory figure.
 * Comparisons of two times without a difference (an order) are not bounds.
 */
export function durationAssertions(file: string, source: string): string[] {
  const sf = ts.createSourceFile(file, source, ts.ScriptTarget.Latest, true);
  const clockVars = new Set<string>();
  const durationVars = new Set<string>();
  const text = (node: ts.Node) => node.getText(sf);
  const mentions = (node: ts.Node, names: Set<string>) => (text(node).match(/[A-Za-z_$][\w$]*/g) ?? []).some((id) => names.has(id));
  const readsClock = (node: ts.Node) => CLOCK.test(text(node)) || mentions(node, clockVars);
  const isDifference = (node: ts.Node): boolean => {
    let found = false;
    const visit = (n: ts.Node) => {
      if (ts.isBinaryExpression(n) && n.operatorToken.kind === ts.SyntaxKind.MinusToken && (readsClock(n.left) || readsClock(n.right)))
        found = true;
      ts.forEachChild(n, visit);
    };
    visit(node);
    return found;
  };
  const remember = (name: string, value: ts.Expression) => {
    if (isDifference(value) || DURATION.test(text(value)) || mentions(value, durationVars)) durationVars.add(name);
    else if (readsClock(value)) clockVars.add(name);
  };
  const collect = (node: ts.Node) => {
    if (ts.isVariableDeclaration(node) && node.initializer && ts.isIdentifier(node.name)) remember(node.name.text, node.initializer);
    if (ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.EqualsToken && ts.isIdentifier(node.left))
      remember(node.left.text, node.right);
    ts.forEachChild(node, collect);
  };
  collect(sf);
  const found: string[] = [];
  const check = (node: ts.Node) => {
    if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression) && ORDER_MATCHERS.has(node.expression.name.text)) {
      let subject: ts.Expression = node.expression.expression;
      while (ts.isPropertyAccessExpression(subject) && ["not", "resolves"].includes(subject.name.text)) subject = subject.expression;
      if (ts.isCallExpression(subject) && text(subject.expression) === "expect" && subject.arguments[0]) {
        const received = subject.arguments[0];
        if (isDifference(received) || DURATION.test(text(received)) || MEMORY.test(text(received)) || mentions(received, durationVars))
          found.push(`${file}:${sf.getLineAndCharacterOfPosition(node.getStart()).line + 1}: ${text(node).split("\n")[0]}`);
      }
    }
    ts.forEachChild(node, check);
  };
  check(sf);
  return found;
}

test("the check finds time and memory bounds, and not orders of times", () => {
  const found = (code: string) => durationAssertions("x.test.ts", code).length;
  expect(found("const t = Date.now(); await f(); expect(Date.now() - t).toBeLessThan(1000);")).toBe(1);
  expect(found("const t = performance.now(); const took = performance.now() - t; expect(took).toBeLessThan(5);")).toBe(1);
  expect(found("expect(row.duration_ms).toBeLessThan(2000);")).toBe(1);
  expect(found("const after = process.memoryUsage(); expect(after.rss - before.rss).toBeLessThan(64);")).toBe(1);
  expect(found("expect(times[1]).toBeLessThanOrEqual(times[0]); expect(a.getTime()).toBeGreaterThanOrEqual(before);")).toBe(0);
  expect(found("expect(rows.length).toBeGreaterThan(2);")).toBe(0);
});

test("every test file that asserts a time or memory bound runs alone (ALONE_FILES)", () => {
  const files = repositoryFiles().filter((file) => file.endsWith(".test.ts"));
  const alone = new Set(ALONE_FILES);
  const missing = files
    .filter((file) => !alone.has(file) && existsSync(path.join(root, file)))
    .flatMap((file) => durationAssertions(file, readFileSync(path.join(root, file), "utf8")));
  expect(missing).toEqual([]);
});

test("STACK_FOLDERS and INTEGRATION_SUFFIX name the integration tier", () => {
  expect(STACK_FOLDERS).toEqual(["e2e", "chaos", "dashboard"]);
  expect(INTEGRATION_SUFFIX).toBe(".integration.test.ts");
});
