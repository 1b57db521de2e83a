// Loaded with `node --import` into a service process of a test: the process's clock (Date.now
// and new Date()) runs TEST_CLOCK_OFFSET_MS ahead (or behind, when negative) of the machine's,
// as a host whose clock drifted would. tests/e2e/delivery-core.test.ts starts a dispatcher so.
const offset = Number(process.env.TEST_CLOCK_OFFSET_MS ?? 0);
const RealDate = Date;
const now = () => RealDate.now() + offset;
class SkewedDate extends RealDate {
  constructor(...args) {
    if (args.length === 0) super(now());
    else super(...args);
  }
  static now() {
    return now();
  }
}
globalThis.Date = SkewedDate;
