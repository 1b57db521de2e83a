// The package is "type": "module", so the CommonJS build needs its own package.json saying so:
// Node then loads dist/cjs/*.js with require, and TypeScript reads dist/cjs/*.d.ts as CommonJS.
import { writeFileSync } from "node:fs";

writeFileSync(new URL("../dist/cjs/package.json", import.meta.url), '{ "type": "commonjs" }\n');
