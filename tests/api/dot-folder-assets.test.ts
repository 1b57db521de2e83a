import { cp, mkdtemp, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import express from "express";
import { dashboardAssets } from "../../apps/api/src/dashboard/index.js";
import { ASSETS_DIR } from "../../apps/api/src/dashboard/render.js";
import { openApiRouter } from "../../apps/api/src/openapi/router.js";

/**
 * Issue 17 ("Bounded by construction"), item 12: the dashboard's and /docs' files are served
 * whatever folder the project is installed in, one with a dot-segment too (`~/.cache/...`):
 * Express refuses dotfile paths by default, which must apply to what a request names, never to
 * the install folder. Here the files are copied under `<tmp>/.cache/install/` and served from
 * there; a dotfile named by a request is still not served.
 */
describe("assets installed under a folder whose path has a dot-segment", () => {
  const require = createRequire(import.meta.url);
  let root: string;
  let server: Server;
  let baseUrl: string;

  beforeAll(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), "dot-assets-"));
    const install = path.join(root, ".cache", "install");
    const swaggerUiDir = path.join(install, "swagger-ui-dist");
    const dashboardDir = path.join(install, "dashboard-assets");
    const htmxFile = path.join(install, "htmx", "htmx.min.js");
    await cp(path.dirname(require.resolve("swagger-ui-dist/package.json")), swaggerUiDir, { recursive: true });
    await cp(ASSETS_DIR, dashboardDir, { recursive: true });
    await cp(require.resolve("htmx.org/dist/htmx.min.js"), htmxFile);
    await cp(path.join(ASSETS_DIR, "dashboard.css"), path.join(dashboardDir, ".secret"));
    const app = express();
    app.use(openApiRouter({ swaggerUiDir }));
    app.use("/dashboard/assets", dashboardAssets({ assetsDir: dashboardDir, htmxFile }));
    server = await new Promise((resolve) => {
      const s = app.listen(0, "127.0.0.1", () => resolve(s));
    });
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((resolve) => server?.close(resolve));
    await rm(root, { recursive: true, force: true });
  });

  test.each([
    "/docs/swagger-ui.css",
    "/docs/swagger-ui-bundle.js",
    "/docs/favicon-32x32.png",
    "/dashboard/assets/htmx.min.js",
    "/dashboard/assets/dashboard.css",
    "/dashboard/assets/favicon.svg",
  ])("%s answers 200", async (file) => {
    const res = await fetch(`${baseUrl}${file}`);
    await res.arrayBuffer();
    expect(res.status).toBe(200);
  });

  test("a dotfile named by the request is not served", async () => {
    const res = await fetch(`${baseUrl}/dashboard/assets/.secret`);
    await res.arrayBuffer();
    expect(res.status).toBe(404);
  });
});
