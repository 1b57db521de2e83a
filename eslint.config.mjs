// ESLint for the whole repository (`npm run lint`): typescript-eslint's type-checked recommended
// rules on every TypeScript file, ESLint's recommended rules on the JavaScript ones. Formatting is
// Prettier's job (.prettierrc.json), so no rule here is about layout.
//
// Types come from the project service: a file belongs to the nearest tsconfig.json that includes
// it, i.e. its workspace's own for product code, and for tests and scripts (which no build
// compiles) the lint-only apps/, packages/, tests/ and scripts/ tsconfig.json (see
// tsconfig.source.json). Lint after `npm run build`: the generated Prisma and API clients must exist.
import eslint from "@eslint/js";
import { defineConfig } from "eslint/config";
import globals from "globals";
import tseslint from "typescript-eslint";

export default defineConfig(
  {
    ignores: [
      "**/node_modules/",
      "**/dist/",
      ".tmp/",
      "coverage/",
      "bench/results/",
      "packages/db/src/generated/",
      "packages/api-client/src/generated/",
    ],
  },
  eslint.configs.recommended,
  tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        projectService: {
          // The few files outside every tsconfig.json: root configuration and the examples.
          allowDefaultProject: ["*.ts", "examples/*.ts", "docs/receivers/*.ts"],
          defaultProject: "tsconfig.source.json",
        },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    linterOptions: { reportUnusedDisableDirectives: "error" },
    rules: {
      // A leading underscore marks what is unused on purpose: Express's four-argument error
      // handlers, and properties left out of a rest (`const { id: _id, ...rest } = row`).
      "@typescript-eslint/no-unused-vars": [
        "error",
        { argsIgnorePattern: "^_", varsIgnorePattern: "^_", caughtErrorsIgnorePattern: "^_", ignoreRestSiblings: true },
      ],
      // An async function without await is how a callback says it returns a promise (waitUntil's
      // probes, fastify's promise-style hooks, stubs of async interfaces); wrapping each in
      // Promise.resolve would say the same with more words.
      "@typescript-eslint/require-await": "off",
      // A variable read by a closure before its one assignment (`secretFor: () => secret`, set
      // once the webhook exists) cannot be a const.
      "prefer-const": ["error", { ignoreReadBeforeAssign: true }],
      // Node's URLSearchParams (from @types/node, not lib.dom) prints as a query string, like the
      // lib one the rule already allows.
      "@typescript-eslint/restrict-template-expressions": [
        "error",
        {
          allow: [
            { from: "lib", name: ["Error", "URL", "URLSearchParams"] },
            { from: "package", package: "url", name: ["URL", "URLSearchParams"] },
          ],
        },
      ],
    },
  },
  {
    // Tests and the benchmark read HTTP bodies and rows as `any` (supertest's `body`, the api()
    // helpers) and let expect() check them at run time: typing every response would rewrite
    // about 1,500 lines and check nothing more.
    files: ["**/*.test.ts", "tests/**", "**/test-support/**", "packages/verify/test/**", "bench/**"],
    rules: {
      "@typescript-eslint/no-explicit-any": "off",
      "@typescript-eslint/no-unsafe-argument": "off",
      "@typescript-eslint/no-unsafe-assignment": "off",
      "@typescript-eslint/no-unsafe-call": "off",
      "@typescript-eslint/no-unsafe-member-access": "off",
      "@typescript-eslint/no-unsafe-return": "off",
    },
  },
  {
    // Plain JavaScript: Node scripts and the dashboard's browser scripts carry no types to check.
    files: ["**/*.{js,mjs,cjs}"],
    extends: [tseslint.configs.disableTypeChecked],
  },
  {
    files: ["**/*.mjs"],
    languageOptions: { globals: globals.node },
  },
  {
    files: ["apps/api/src/dashboard/assets/*.js"],
    languageOptions: { sourceType: "script", globals: { ...globals.browser, htmx: "readonly" } },
  },
);
