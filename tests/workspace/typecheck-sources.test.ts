import path from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

/**
 * `npm run lint` type-checks the tests (`npm run typecheck:tests`) right after `npm ci`, before any
 * `npm run build` (CONTRIBUTING.md, "Lint and format"): every tsconfig that type-checks tests or
 * scripts must resolve `@mailhooks/*` to the packages' sources (the "source" export condition),
 * never to their dist/ folders, which only a build makes.
 */
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

const TSCONFIGS = ["tsconfig.jest.json", "tests/dashboard/tsconfig.browser.json", "tests/tsconfig.json", "scripts/tsconfig.json"];

function compilerOptions(tsconfig: string): ts.CompilerOptions {
  const file = path.join(root, tsconfig);
  const { config, error } = ts.readConfigFile(file, (name) => ts.sys.readFile(name));
  if (error) throw new Error(ts.flattenDiagnosticMessageText(error.messageText, "\n"));
  return ts.parseJsonConfigFileContent(config, ts.sys, path.dirname(file)).options;
}

test.each(TSCONFIGS)("%s resolves @mailhooks/* to the packages' sources", (tsconfig) => {
  const options = compilerOptions(tsconfig);
  const importer = path.join(root, "tests/workspace/typecheck-sources.test.ts");
  for (const name of ["@mailhooks/processes", "@mailhooks/command-line/service"]) {
    const resolved = ts.resolveModuleName(name, importer, options, ts.sys).resolvedModule?.resolvedFileName;
    expect({ name, resolved: resolved && path.relative(root, resolved) }).toEqual({
      name,
      resolved: expect.stringMatching(/^packages\/[a-z-]+\/src\//),
    });
  }
});
