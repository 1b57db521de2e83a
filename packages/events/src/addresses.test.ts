import emailAddresses from "email-addresses";
import fc from "fast-check";
import { isMailbox, MAX_ADDRESS_LENGTH } from "./addresses.js";

/** What email-addresses alone says: exactly one mailbox. */
function parserSaysMailbox(input: string): boolean {
  try {
    return emailAddresses.parseOneAddress({ input, rfc6532: true })?.type === "mailbox";
  } catch {
    return false;
  }
}

const atext = fc.constantFrom(..."abcXYZ019!#$%&'*+-/=?^_`{|}~éß中");
const atom = fc.string({ unit: atext, minLength: 1, maxLength: 8 });
const dotAtom = fc.array(atom, { minLength: 1, maxLength: 4 }).map((atoms) => atoms.join("."));
// Inside quotes: specials, white space, escapes of quotes and backslashes, non-ASCII.
const quotedUnit = fc.oneof(fc.constantFrom(..."ab ,;:<>@()[].\té中"), fc.constantFrom('\\"', "\\\\", "\\a", "\\ "));
const quotedString = fc.array(quotedUnit, { maxLength: 10 }).map((units) => `"${units.join("")}"`);
const addrSpec = fc.tuple(fc.oneof(dotAtom, quotedString), dotAtom).map(([local, domain]) => `${local}@${domain}`);
const phraseWord = fc.tuple(atom, fc.constantFrom("", ".", "..")).map(([word, dots]) => word + dots);
const phrase = fc
  .array(phraseWord, { minLength: 1, maxLength: 4 })
  .chain((words) =>
    fc
      .array(fc.constantFrom(" ", "\t", "  "), { minLength: words.length - 1, maxLength: words.length - 1 })
      .map((gaps) => words.map((word, i) => (i === 0 ? word : gaps[i - 1] + word)).join("")),
  );
const everydayMailbox = fc.oneof(
  addrSpec,
  addrSpec.map((spec) => `<${spec}>`),
  fc.tuple(fc.oneof(phrase, quotedString), fc.constantFrom("", " ", "\t"), addrSpec).map(([name, gap, spec]) => `${name}${gap}<${spec}>`),
);

describe("isMailbox", () => {
  it("accepts every everyday form, and email-addresses agrees on each", () => {
    fc.assert(
      fc.property(everydayMailbox, (input) => {
        expect(isMailbox(input)).toBe(true);
        expect(parserSaysMailbox(input)).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });

  it("says what email-addresses says on any short string (control characters aside)", () => {
    const junk = fc.string({ unit: fc.constantFrom(...'a.@<>"()[]\\,;: \té'), maxLength: 40 });
    fc.assert(
      fc.property(
        fc.oneof(
          junk,
          everydayMailbox.map((m) => m + "x"),
          everydayMailbox.map((m) => "(c) " + m),
        ),
        (input) => {
          expect(isMailbox(input)).toBe(parserSaysMailbox(input));
        },
      ),
      { numRuns: 2000 },
    );
  });

  it("passes uncommon forms to email-addresses", () => {
    expect(isMailbox("alice@example.com (Alice Example)")).toBe(true);
    expect(isMailbox("(comment) Alice <alice@example.com>")).toBe(true);
    expect(isMailbox("alice@[192.0.2.1]")).toBe(true);
    expect(isMailbox('"Doe" John <john@example.com>')).toBe(true);
    expect(isMailbox(" alice@example.com ")).toBe(true);
  });

  it("parses uncommon forms up to 128 characters only", () => {
    const spec = "alice@example.com";
    const comment = (length: number) => `(${"c".repeat(length - spec.length - 3)}) ${spec}`;
    expect(comment(128)).toHaveLength(128);
    expect(isMailbox(comment(128))).toBe(true);
    expect(isMailbox(comment(129))).toBe(false);
  });

  it.each([
    ["a newline (folded header)", "Alice\r\n <alice@example.com>"],
    ["a bare line feed", "Alice\n<alice@example.com>"],
    ["a NUL", "alice@example.com\u0000"],
    ["an escape character", "Alice\u001b <alice@example.com>"],
    ["an unpaired surrogate", "\ud800lice@example.com"],
  ])("refuses %s, which email-addresses alone may accept", (_label, input) => {
    expect(isMailbox(input)).toBe(false);
  });

  it("takes an everyday address up to one header line, and no more", () => {
    const local = "a".repeat(64);
    const name = "N".repeat(MAX_ADDRESS_LENGTH - local.length - "@example.com".length - 3);
    const longest = `${name} <${local}@example.com>`;
    expect(longest).toHaveLength(MAX_ADDRESS_LENGTH);
    expect(isMailbox(longest)).toBe(true);
    expect(isMailbox(`N${longest}`)).toBe(false);
  });

  it("refuses what would make the parser backtrack for long, without calling it", () => {
    // Unguarded, email-addresses takes ~0.4 s on the first and overflows the stack on 2,000 "(".
    const hostile = [
      "(".repeat(998),
      "a(".repeat(499),
      '"'.repeat(998),
      "a.".repeat(499),
      "a ".repeat(499),
      "(((a)))@b.c",
      `(${"x".repeat(300)}) a@b.c`,
    ];
    const started = performance.now();
    for (const input of hostile) expect(isMailbox(input)).toBe(false);
    expect(performance.now() - started).toBeLessThan(500);
  });
});
