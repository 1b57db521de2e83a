import { readFileSync } from "node:fs";
import path from "node:path";
import { repositoryFiles, ROOT } from "../support/repo-files.js";

/**
 * The repository stands alone (CONTRIBUTING.md, Habits 14): no file refers to documents outside
 * it (the folder of shared notes beside the team's working copies, the service contract and style
 * guide kept there). Behaviour is stated in `docs/`, and comments cite those pages.
 *
 * One exception: the SQL of migrations, whose bytes are fixed once applied (`npm run db:migrate`
 * records each one's checksum in `_prisma_migrations` and refuses a migration changed since; a
 * comment edited there would stop every database that applied it).
 */
const OUTSIDE = [["..", "shared"].join("/"), ["CONTRACT", "md"].join("."), ["STYLE", "md"].join(".")];
const BINARY = /\.(png|jpe?g|gif|ico|woff2?|eml|tgz|gz|zip|pdf)$/i;
const FIXED_ONCE_APPLIED = /^prisma\/migrations\/[^/]+\/migration\.sql$/;

test("no file of the repository refers to a document outside it", () => {
  const files = repositoryFiles().filter((file) => !BINARY.test(file) && !FIXED_ONCE_APPLIED.test(file));
  expect(files).toContain("README.md");
  const found = files.flatMap((file) =>
    readFileSync(path.join(ROOT, file), "utf8")
      .split("\n")
      .flatMap((line, i) => (OUTSIDE.some((name) => line.includes(name)) ? [`${file}:${i + 1}: ${line.trim()}`] : [])),
  );
  expect(found).toEqual([]);
});
