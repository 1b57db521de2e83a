import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The project is MIT-licensed: the root LICENSE holds the MIT text, and the root and every
 * workspace (the root's `workspaces` globs, `dir/*`) say `"license": "MIT"`, so that a packed
 * workspace (@mailhooks/verify above all) says what its users may do with it.
 */
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const manifest = (dir: string) =>
  JSON.parse(readFileSync(path.join(root, dir, "package.json"), "utf8")) as { license?: string; workspaces?: string[] };

const workspaces = (manifest("").workspaces ?? []).flatMap((glob) => {
  const parent = glob.replace(/\/\*$/, "");
  return readdirSync(path.join(root, parent))
    .map((name) => `${parent}/${name}`)
    .filter((dir) => existsSync(path.join(root, dir, "package.json")));
});

describe("the licence", () => {
  test("LICENSE at the root is the MIT licence of the mailhooks authors", () => {
    const text = readFileSync(path.join(root, "LICENSE"), "utf8");
    expect(text).toMatch(/^MIT License\n\nCopyright \(c\) 2026 the mailhooks authors\n/);
    expect(text).toContain("Permission is hereby granted, free of charge, to any person obtaining a copy");
    expect(text).toContain('THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND');
  });

  test("the root and every workspace say MIT in package.json", () => {
    expect(workspaces.length).toBeGreaterThan(10);
    const licences = Object.fromEntries(["", ...workspaces].map((dir) => [dir || "(root)", manifest(dir).license]));
    expect(licences).toEqual(Object.fromEntries(Object.keys(licences).map((dir) => [dir, "MIT"])));
  });
});
