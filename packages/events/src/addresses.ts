import emailAddresses from "email-addresses";

/**
 * RFC 5322 mailboxes in `from` and `to` (docs/api.md, "Events"): bare (`alice@example.com`) or
 * with a display name (`Alice Example <alice@example.com>`, `"Doe, John" <john@example.com>`),
 * UTF-8 allowed (RFC 6532). The string is only checked; it travels unchanged.
 */

/** One header line (RFC 5322 section 2.1.1), in UTF-16 units. */
export const MAX_ADDRESS_LENGTH = 998;

// A header is unfolded before its address is taken: CR, LF (and any other control character
// but HTAB, which RFC 5322 counts as white space) never belong to an address. Nor does an
// unpaired surrogate, which has no UTF-8 form (RFC 6532).
// eslint-disable-next-line no-control-regex -- the control characters are what it refuses
const FORBIDDEN_CHARACTER = /[\u0000-\u0008\u000a-\u001f\u007f]|\p{Cs}/u;

const ATEXT = "[A-Za-z0-9!#$%&'*+\\-/=?^_`{|}~\\u0080-\\uffff]";
const DOT_ATOM = `${ATEXT}+(?:\\.${ATEXT}+)*`;
const QUOTED_STRING = `"(?:[^"\\\\\\u0000-\\u0008\\u000a-\\u001f\\u007f]|\\\\[^\\u0000-\\u0008\\u000a-\\u001f\\u007f])*"`;
const ADDR_SPEC = `(?:${DOT_ATOM}|${QUOTED_STRING})@${DOT_ATOM}`;
// Unquoted words may hold periods (`John Q. Public`): RFC 5322's obsolete phrase, common in mail.
const PHRASE = `${ATEXT}[.A-Za-z0-9!#$%&'*+\\-/=?^_\`{|}~\\u0080-\\uffff]*(?:[ \\t]+${ATEXT}[.A-Za-z0-9!#$%&'*+\\-/=?^_\`{|}~\\u0080-\\uffff]*)*`;

/**
 * The everyday forms, recognized in linear time: `addr-spec`, `<addr-spec>`, and a display
 * name (words, or one quoted string) before `<addr-spec>`; dot-atom domains. Every string it
 * matches is one mailbox to email-addresses too (addresses.test.ts checks generated ones), so
 * those skip the parser, which costs ~50 µs a call even on `a@b.c`.
 */
const COMMON_MAILBOX = new RegExp(`^(?:${ADDR_SPEC}|(?:(?:${PHRASE}|${QUOTED_STRING})[ \\t]*)?<${ADDR_SPEC}>)$`);

/** The longest uncommon form handed to the parser; such a mailbox has a few words. */
const MAX_PARSED_LENGTH = 128;
const MAX_COMMENT_DEPTH = 2;

/**
 * Whether email-addresses may be given `input`. It is a backtracking parser that retries a
 * failed input as obsolete syntax: 998 unclosed "(" take it ~0.4 s, ~2,000 overflow the
 * stack, and a failing input costs it up to ~150 µs a character. So only inputs of at most
 * MAX_PARSED_LENGTH characters whose quoted strings, comments and domain literals are closed
 * (comments nested at most twice) reach it: ~2 ms at worst for a valid one, ~20 ms for a
 * failing one (hence lists stop at their first invalid address, see schemas.ts).
 */
function withinParserBounds(input: string): boolean {
  if (input.length > MAX_PARSED_LENGTH) return false;
  let i = 0;
  while (i < input.length) {
    const open = input[i++];
    const close = open === '"' ? '"' : open === "(" ? ")" : open === "[" ? "]" : null;
    if (close === null) continue;
    let depth = 1;
    while (i < input.length && depth > 0) {
      const c = input[i++];
      if (c === "\\") i++;
      else if (c === close) depth--;
      else if (open === "(" && c === "(" && ++depth > MAX_COMMENT_DEPTH) return false;
    }
    if (depth > 0) return false;
  }
  return true;
}

/**
 * True when `input` is exactly one RFC 5322 mailbox (RFC 6532 UTF-8 allowed) of at most
 * MAX_ADDRESS_LENGTH characters: not a group, not a list, no line break. Uncommon forms
 * (comments, domain literals, other obsolete syntax) go to email-addresses'
 * `parseOneAddress({ input, rfc6532: true })`, which must return one mailbox. Never throws.
 */
export function isMailbox(input: string): boolean {
  if (input.length === 0 || input.length > MAX_ADDRESS_LENGTH || FORBIDDEN_CHARACTER.test(input)) return false;
  if (COMMON_MAILBOX.test(input)) return true;
  if (!withinParserBounds(input)) return false;
  try {
    return emailAddresses.parseOneAddress({ input, rfc6532: true })?.type === "mailbox";
  } catch {
    // A RangeError (deep recursion) is a refusal like any other.
    return false;
  }
}
