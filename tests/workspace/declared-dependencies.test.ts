import { readdirSync, readFileSync, statSync } from "node:fs";
import { isBuiltin } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

/**
 * Every workspace declares what it imports. An undeclared import works only as long as
 * something else happens to install the package (ipaddr.js 1.9.1 came from Express, and was
 * too old to know the ranges the address policy needed), so `npm test` fails on one.
 *
 * Scanned: the TypeScript and ESM/CJS script files (.ts, .mts, .cts, .mjs, .cjs) of every
 * workspace of the root `workspaces` field, and of the root itself (scripts/, bench/, tests/,
 * examples/, the root config files); not node_modules, dist, nor the generated Prisma client
 * (packages/db/src/generated). Module specifiers come from the TypeScript parser, so comments
 * and strings never count: static `import ... from`, `export ... from`, `import x = require()`,
 * `import("x")`, `require("x")`, `require.resolve("x")` and type-level `import("x")`. A
 * specifier maps to its package name (`a/b` → `a`, `@s/a/b` → `@s/a`); `node:` and Node's
 * builtin module names are ignored, and so is a package importing itself by its own name.
 *
 * What satisfies an import:
 * - a workspace's shipped file, runtime import: its `dependencies`, `peerDependencies` or
 *   `optionalDependencies` (a `devDependency` is not installed for its users);
 * - a type-only import (`import type`, `export type`, every named binding marked `type`, or a
 *   type-level `import("x")`): also its `devDependencies`, and `@types/x` for `x`;
 * - a workspace's test file (`*.test.ts`, or any file under a `test/` or `test-support/` folder:
 *   run by the root's jest and never shipped): also its
 *   `devDependencies` and the root's `devDependencies` (jest, @jest/globals, supertest,
 *   fast-check, get-port, ...). Another workspace (`@mailhooks/x`) must still be declared by
 *   the workspace itself, since the root does not list its members as dependencies;
 * - a root file: the root's dependencies of any kind, and the root's own workspaces.
 * A relative import that leaves a workspace's directory is refused too: it would reach another
 * workspace's sources without declaring it (root files, which own every workspace, may).
 */

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const SOURCE_EXTENSIONS = new Set([".ts", ".mts", ".cts", ".mjs", ".cjs"]);
const SKIPPED_DIRS = new Set(["node_modules", "dist", "coverage"]);
/** Folders of test support code inside a workspace: never built nor shipped, like `*.test.ts`. */
const TEST_DIRS = new Set(["test", "test-support"]);
const GENERATED = path.join(root, "packages/db/src/generated");

interface Manifest {
  name?: string;
  workspaces?: string[];
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
}

interface Workspace {
  /** Directory relative to the root; "" for the root. */
  dir: string;
  label: string;
  manifest: Manifest;
}

interface ImportRef {
  specifier: string;
  typeOnly: boolean;
}

function readManifest(dir: string): Manifest {
  return JSON.parse(readFileSync(path.join(root, dir, "package.json"), "utf8")) as Manifest;
}

/** The root's workspaces; only the `dir/*` and plain `dir` patterns this repository uses. */
function listWorkspaces(rootManifest: Manifest): Workspace[] {
  const dirs = (rootManifest.workspaces ?? []).flatMap((pattern) => {
    if (!pattern.endsWith("/*")) return [pattern];
    const parent = pattern.slice(0, -2);
    return readdirSync(path.join(root, parent), { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => `${parent}/${entry.name}`);
  });
  return dirs
    .filter((dir) => statSync(path.join(root, dir, "package.json"), { throwIfNoEntry: false })?.isFile())
    .map((dir) => {
      const manifest = readManifest(dir);
      return { dir, label: manifest.name ?? dir, manifest };
    });
}

/** Source files under `dir` (relative to the root), not descending into `exclude` (absolute). */
function sourceFiles(dir: string, exclude: Set<string>): string[] {
  const files: string[] = [];
  const walk = (absolute: string): void => {
    for (const entry of readdirSync(absolute, { withFileTypes: true })) {
      const child = path.join(absolute, entry.name);
      if (entry.isDirectory()) {
        if (SKIPPED_DIRS.has(entry.name) || entry.name.startsWith(".") || child === GENERATED || exclude.has(child)) continue;
        walk(child);
      } else if (entry.isFile() && SOURCE_EXTENSIONS.has(path.extname(entry.name)) && !entry.name.endsWith(".d.ts")) {
        files.push(path.relative(root, child));
      }
    }
  };
  walk(path.join(root, dir));
  return files.sort();
}

function allTypeOnly(elements: ts.NodeArray<ts.ImportSpecifier | ts.ExportSpecifier>): boolean {
  return elements.length > 0 && elements.every((element) => element.isTypeOnly);
}

/** Every module specifier `file` (relative to the root) names, with whether it is type-only. */
function importsOf(file: string): ImportRef[] {
  return importsIn(file, readFileSync(path.join(root, file), "utf8"));
}

/** Every module specifier in `text`, the contents of a file named `file`, in source order. */
function importsIn(file: string, text: string): ImportRef[] {
  const kind = /\.[mc]?ts$/.test(file) ? ts.ScriptKind.TS : ts.ScriptKind.JS;
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, false, kind);
  const found: ImportRef[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      const clause = node.importClause;
      const named = clause?.namedBindings && ts.isNamedImports(clause.namedBindings) ? clause.namedBindings : undefined;
      const typeOnly = !!clause && (clause.isTypeOnly || (!clause.name && !!named && allTypeOnly(named.elements)));
      found.push({ specifier: node.moduleSpecifier.text, typeOnly });
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      const named = node.exportClause && ts.isNamedExports(node.exportClause) ? node.exportClause : undefined;
      found.push({ specifier: node.moduleSpecifier.text, typeOnly: node.isTypeOnly || (!!named && allTypeOnly(named.elements)) });
    } else if (
      ts.isImportEqualsDeclaration(node) &&
      ts.isExternalModuleReference(node.moduleReference) &&
      ts.isStringLiteral(node.moduleReference.expression)
    ) {
      found.push({ specifier: node.moduleReference.expression.text, typeOnly: node.isTypeOnly });
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      found.push({ specifier: node.argument.literal.text, typeOnly: true });
    } else if (ts.isCallExpression(node) && node.arguments.length > 0 && ts.isStringLiteralLike(node.arguments[0])) {
      const callee = node.expression;
      const isImport = callee.kind === ts.SyntaxKind.ImportKeyword;
      const isRequire = ts.isIdentifier(callee) && callee.text === "require";
      const isResolve =
        ts.isPropertyAccessExpression(callee) &&
        ts.isIdentifier(callee.expression) &&
        callee.expression.text === "require" &&
        callee.name.text === "resolve";
      if (isImport || isRequire || isResolve) found.push({ specifier: node.arguments[0].text, typeOnly: false });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** The package a bare specifier names, or null for relative paths, builtins and `#` imports. */
function packageName(specifier: string): string | null {
  if (specifier.startsWith(".") || specifier.startsWith("/") || specifier.startsWith("#")) return null;
  if (specifier.startsWith("node:") || isBuiltin(specifier)) return null;
  const parts = specifier.split("/");
  return specifier.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0];
}

/** DefinitelyTyped's name for `name`: `@types/x`, `@types/scope__x`. */
function typesPackage(name: string): string {
  return `@types/${name.startsWith("@") ? name.slice(1).replace("/", "__") : name}`;
}

const names = (...maps: (Record<string, string> | undefined)[]): Set<string> => new Set(maps.flatMap((map) => Object.keys(map ?? {})));

/** `<workspace>: <package> imported by <file> but not declared` for every violation. */
function violations(): string[] {
  const rootManifest = readManifest("");
  const workspaces = listWorkspaces(rootManifest);
  const workspaceNames = new Set(workspaces.map((w) => w.manifest.name).filter((n): n is string => !!n));
  const rootDeclared = names(
    rootManifest.dependencies,
    rootManifest.devDependencies,
    rootManifest.peerDependencies,
    rootManifest.optionalDependencies,
  );
  const problems: string[] = [];

  for (const workspace of workspaces) {
    const m = workspace.manifest;
    const shipped = names(m.dependencies, m.peerDependencies, m.optionalDependencies);
    const declared = names(m.dependencies, m.devDependencies, m.peerDependencies, m.optionalDependencies);
    const workspaceDir = path.join(root, workspace.dir);
    for (const file of sourceFiles(workspace.dir, new Set())) {
      const isTest = file.endsWith(".test.ts") || file.split("/").some((part) => TEST_DIRS.has(part));
      for (const ref of importsOf(file)) {
        if (ref.specifier.startsWith(".")) {
          const target = path.resolve(path.dirname(path.join(root, file)), ref.specifier);
          if (!target.startsWith(workspaceDir + path.sep)) {
            problems.push(`${workspace.label}: ${path.relative(root, target)} imported by ${file} from outside the workspace`);
          }
          continue;
        }
        const name = packageName(ref.specifier);
        if (!name || name === m.name) continue;
        const satisfied =
          shipped.has(name) ||
          ((ref.typeOnly || isTest) && declared.has(name)) ||
          (ref.typeOnly && declared.has(typesPackage(name))) ||
          (isTest && !workspaceNames.has(name) && rootDeclared.has(name));
        if (!satisfied) problems.push(`${workspace.label}: ${name} imported by ${file} but not declared`);
      }
    }
  }

  const workspaceDirs = new Set(workspaces.map((w) => path.join(root, w.dir)));
  for (const file of sourceFiles("", workspaceDirs)) {
    for (const ref of importsOf(file)) {
      const name = packageName(ref.specifier);
      if (!name || workspaceNames.has(name) || rootDeclared.has(name)) continue;
      if (ref.typeOnly && rootDeclared.has(typesPackage(name))) continue;
      problems.push(`${rootManifest.name ?? "root"} (root): ${name} imported by ${file} but not declared`);
    }
  }
  return [...new Set(problems)].sort();
}

describe("declared dependencies", () => {
  it("finds the imports of every kind of statement, and only real ones", () => {
    const refs = importsIn(
      "fixture.ts",
      [
        'import staticDefault from "static-default";',
        'import { named } from "@scope/static-named/sub/path";',
        'import type { T } from "type-only";',
        'import { type A, type B } from "all-bindings-typed";',
        'import { type C, D } from "some-bindings-typed";',
        'import "side-effect";',
        'export { e } from "re-export";',
        'export type { F } from "type-re-export";',
        'import eq = require("import-equals");',
        'let t: import("type-level-import").T;',
        'const lazy = await import("dynamic");',
        'const r = require("required");',
        'const p = require.resolve("resolved");',
        'import { readFileSync } from "node:fs";',
        'import { local } from "./relative.js";',
        '// import commented from "in-a-comment";',
        "const s = \"import fake from 'in-a-string'\";",
        "const computed = require(name);",
      ].join("\n"),
    );
    expect(refs).toEqual([
      { specifier: "static-default", typeOnly: false },
      { specifier: "@scope/static-named/sub/path", typeOnly: false },
      { specifier: "type-only", typeOnly: true },
      { specifier: "all-bindings-typed", typeOnly: true },
      { specifier: "some-bindings-typed", typeOnly: false },
      { specifier: "side-effect", typeOnly: false },
      { specifier: "re-export", typeOnly: false },
      { specifier: "type-re-export", typeOnly: true },
      { specifier: "import-equals", typeOnly: false },
      { specifier: "type-level-import", typeOnly: true },
      { specifier: "dynamic", typeOnly: false },
      { specifier: "required", typeOnly: false },
      { specifier: "resolved", typeOnly: false },
      { specifier: "node:fs", typeOnly: false },
      { specifier: "./relative.js", typeOnly: false },
    ]);
  });

  it("maps specifiers to package names and ignores builtins", () => {
    expect(packageName("ipaddr.js")).toBe("ipaddr.js");
    expect(packageName("@prisma/client/runtime/client")).toBe("@prisma/client");
    expect(packageName("@bull-board/api/bullMQAdapter")).toBe("@bull-board/api");
    expect(packageName("zod/v4")).toBe("zod");
    expect(packageName("node:crypto")).toBeNull();
    expect(packageName("fs/promises")).toBeNull();
    expect(packageName("crypto")).toBeNull();
    expect(packageName("./local.js")).toBeNull();
    expect(typesPackage("express")).toBe("@types/express");
    expect(typesPackage("@scope/pkg")).toBe("@types/scope__pkg");
  });

  it("every workspace declares the packages it imports", () => {
    expect(violations()).toEqual([]);
  });
});
