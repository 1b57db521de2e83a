/** A minimal client of the service's REST API, as any user would write one. */
export class ApiClient {
  constructor(
    private readonly baseUrl: string,
    private readonly apiKey: string,
  ) {}

  async request<T = any>(method: string, path: string, body?: unknown, contentType = "application/json"): Promise<{ status: number; body: T }> {
    const response = await fetch(`${this.baseUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${this.apiKey}`, ...(body !== undefined ? { "content-type": contentType } : {}) },
      body: body === undefined ? undefined : Buffer.isBuffer(body) ? body : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : null };
  }

  /** Every item of a list endpoint, following next_cursor. */
  async listAll<T = any>(path: string): Promise<T[]> {
    const items: T[] = [];
    let cursor: string | null = null;
    do {
      const sep = path.includes("?") ? "&" : "?";
      const page: { status: number; body: { data: T[]; next_cursor: string | null } } = await this.request("GET", `${path}${sep}limit=100${cursor ? `&cursor=${cursor}` : ""}`);
      if (page.status !== 200) throw new Error(`GET ${path}: ${page.status} ${JSON.stringify(page.body)}`);
      items.push(...page.body.data);
      cursor = page.body.next_cursor;
    } while (cursor);
    return items;
  }
}
