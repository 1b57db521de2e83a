import { createRequire } from "node:module";
import path from "node:path";
import { Router, type RequestHandler } from "express";
import helmet from "helmet";
import { createOpenApiDocument } from "./document.js";

/**
 * GET /openapi.json (the document) and GET /docs (a readable reference of it: Swagger UI served
 * from the swagger-ui-dist package, no third-party host; docs/api.md, "A typed client"). Neither needs
 * an API key. The reference's scripts are files of this server, never inline. Its
 * Content-Security-Policy is helmet's default relaxed in one way: no `upgrade-insecure-requests`,
 * which makes a browser fetch the page's own scripts over https and leaves the page blank when
 * the API is reached over plain http on a host other than localhost (a test machine, a private
 * network). Styles and images come from this origin only (Swagger UI sets inline styles and
 * data: icons, which the defaults allow); its calls ("Try it out") go to this origin only.
 */

const require = createRequire(import.meta.url);
const SWAGGER_UI_DIR = path.dirname(require.resolve("swagger-ui-dist/package.json"));
/** The only files of the package that are served. */
const ASSETS = ["swagger-ui.css", "swagger-ui-bundle.js", "favicon-32x32.png", "favicon-16x16.png"];

// Relative URLs, so that the page also works behind a proxy that mounts the API under a prefix.
const PAGE = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Email event webhooks API reference</title>
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <link rel="stylesheet" href="docs/swagger-ui.css">
  <link rel="icon" type="image/png" href="docs/favicon-32x32.png" sizes="32x32">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="docs/swagger-ui-bundle.js"></script>
  <script src="docs/init.js"></script>
</body>
</html>
`;

// validatorUrl null: Swagger UI would otherwise send the document to validator.swagger.io.
const INIT = `window.ui = SwaggerUIBundle({
  url: new URL("openapi.json", document.baseURI).href,
  dom_id: "#swagger-ui",
  deepLinking: true,
  validatorUrl: null,
  presets: [SwaggerUIBundle.presets.apis],
  layout: "BaseLayout",
});
`;

const docsPolicy: RequestHandler = helmet.contentSecurityPolicy({
  useDefaults: true,
  directives: { "upgrade-insecure-requests": null, "style-src": ["'self'", "'unsafe-inline'"], "connect-src": ["'self'"] },
});

/** `swaggerUiDir`: where swagger-ui-dist is installed (found by module resolution by default). */
export function openApiRouter(options: { swaggerUiDir?: string } = {}): Router {
  const swaggerUiDir = options.swaggerUiDir ?? SWAGGER_UI_DIR;
  const router = Router();
  const body = JSON.stringify(createOpenApiDocument());
  router.get("/openapi.json", (_req, res) => {
    res.type("application/json").send(body);
  });
  router.get("/docs", docsPolicy, (req, res) => {
    // The page's URLs are relative to /docs: /docs/ would resolve them under /docs/docs/.
    if (req.path.endsWith("/")) return res.redirect(301, "../docs");
    res.type("html").send(PAGE);
  });
  router.get("/docs/init.js", docsPolicy, (_req, res) => {
    res.type("text/javascript").send(INIT);
  });
  for (const file of ASSETS) {
    router.get(`/docs/${file}`, docsPolicy, (_req, res, next) => {
      // `root` + a name of this list: Express refuses dot-segments of the path it is given
      // (dotfiles), which must apply to the request, never to the install folder (`~/.cache/...`).
      res.sendFile(file, { root: swaggerUiDir, maxAge: "1h" }, (error) => error && next(error));
    });
  }
  return router;
}
