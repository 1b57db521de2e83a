import { chromium, type Browser } from "playwright-core";

/**
 * Debian's Chromium, driven by playwright-core: never a downloaded browser (`.ci/run` installs
 * the `chromium` package when /usr/bin/chromium is missing). The flags keep it headless, as root,
 * and off the network this machine cannot reach.
 */
export const CHROMIUM = "/usr/bin/chromium";
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

/** A headless Chromium; close it when done. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, args: FLAGS });
}
