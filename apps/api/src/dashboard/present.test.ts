import { present, webhookName } from "./present.js";
import { asList, asUtc, byField } from "./forms.js";

/** The dashboard's presentation helpers: times in UTC ISO 8601 with a relative hint, outcomes in words, form shapes. */
describe("dashboard presentation", () => {
  const now = new Date("2026-11-23T12:00:00.000Z");
  const h = present(now);

  test("times: ISO 8601 UTC to the second, with a relative hint in the past or the future", () => {
    expect(h.time("2026-11-23T11:59:58.400Z")).toEqual({
      iso: "2026-11-23T11:59:58Z",
      full: "2026-11-23T11:59:58.400Z",
      relative: "just now",
    });
    expect(h.time("2026-11-23T11:59:30Z")!.relative).toBe("30 s ago");
    expect(h.time("2026-11-23T11:45:00Z")!.relative).toBe("15 min ago");
    expect(h.time("2026-11-23T09:00:00Z")!.relative).toBe("3 h ago");
    expect(h.time("2026-11-22T10:00:00Z")!.relative).toBe("1 day ago");
    expect(h.time("2027-02-21T12:00:00Z")!.relative).toBe("in 90 days");
    expect(h.time("2026-11-23T12:00:10Z")!.relative).toBe("in 10 s");
    expect(h.time(null)).toBeNull();
  });

  test("ids of the service are shortened for tables; other text is left as it is", () => {
    expect(h.shortId("evt_01a215660e4570a0b90a6ea64e920b08")).toBe("evt_01a215…0b08");
    expect(h.shortId("key_019a2b3c4d5e7f00a1b2c3d4e5f60718")).toBe("key_019a2b…0718");
    expect(h.shortId("support@inbox.example.net")).toBe("support@inbox.example.net");
  });

  test("URLs break only after separators, and are escaped", () => {
    expect(h.breakable("https://hooks.example.com/a-b?x=1&y=<2>")).toBe(
      "https://<wbr>hooks.<wbr>example.<wbr>com/<wbr>a-<wbr>b?<wbr>x=<wbr>1&amp;<wbr>y=<wbr>&lt;2&gt;",
    );
    expect(h.breakable(`"'`)).toBe("&quot;&#39;");
  });

  test("a null URL (a listen webhook's) is named, never shown as null", () => {
    expect(h.destination(null)).toBe('<span class="muted">(pulled by listen)</span>');
    expect(h.destination("https://a.example/x?y=<1>")).toBe(h.breakable("https://a.example/x?y=<1>"));
    expect(h.webhookName({ id: "wh_019a2b3c4d5e7f00a1b2c3d4e5f60718", url: null })).toBe("listen webhook wh_019a2b…0718");
    expect(h.webhookName({ id: "wh_019a2b3c4d5e7f00a1b2c3d4e5f60718", url: "https://a.example/" })).toBe("https://a.example/");
    expect(webhookName({ id: "wh_019a2b3c4d5e7f00a1b2c3d4e5f60718", url: null })).toBe(
      "listen webhook wh_019a2b3c4d5e7f00a1b2c3d4e5f60718",
    );
  });

  test("outcomes and errors in words", () => {
    expect(h.outcome(204, null)).toBe("204, delivered");
    expect(h.outcome(401, null)).toBe("401, refused by the endpoint");
    expect(h.outcome(null, "timeout")).toBe("no answer within the deadline");
    expect(h.outcome(null, "something_new")).toBe("something new");
    expect(h.errorWords("dns_error")).toBe("host name not found");
    expect(h.percent(0, 0)).toBe("no attempts");
    expect(h.percent(2, 3)).toBe("67 % (2 of 3)");
    expect(h.bytes("é")).toBe(2);
  });

  test("query strings keep only non-empty values, encoded", () => {
    expect(h.query({ a: "", b: undefined, c: 'x"<y>' })).toBe("?c=x%22%3Cy%3E");
    expect(h.query({})).toBe("");
  });

  test("forms: checkboxes as a list, datetime-local read as UTC, problems by field", () => {
    expect(asList(undefined)).toEqual([]);
    expect(asList("message.sent")).toEqual(["message.sent"]);
    expect(asList(["a", "b"])).toEqual(["a", "b"]);
    expect(asUtc("2026-11-23T10:00")).toBe("2026-11-23T10:00:00Z");
    expect(asUtc("2026-11-23T10:00:30")).toBe("2026-11-23T10:00:30Z");
    expect(asUtc("2026-11-23T10:00:00+02:00")).toBe("2026-11-23T10:00:00+02:00");
    expect(
      byField([
        { path: "events.0", message: "must be one of" },
        { path: "url", message: "bad" },
        { path: "", message: "whole form" },
      ]),
    ).toEqual({ events: "must be one of", url: "bad", form: "whole form" });
  });
});
