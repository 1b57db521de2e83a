import { chromium, type Browser } from "playwright-core";
import { findChromium } from "../../scripts/chromium.js";

/**
 * A Chromium of the machine, driven by playwright-core: never a downloaded browser. It is the one
 * scripts/chromium.ts finds (`CHROMIUM_PATH`, else `chromium` and the like on PATH or where
 * packages put it), which `npm test` installs with apt-get when it can. The flags keep it
 * headless, as root, and off the network this machine cannot reach.
 */
const FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/** A headless Chromium; close it when done. @throws Error saying what to install when there is no browser. */
export function launchChromium(): Promise<Browser> {
  const found = findChromium();
  if ("problem" in found) return Promise.reject(new Error(found.problem));
  return chromium.launch({ executablePath: found.path, args: FLAGS });
}
