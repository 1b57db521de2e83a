/** The two functions of `cookie` 0.7 the dashboard uses (the package ships no types, and @types/cookie is not installed). */
declare module "cookie" {
  export interface SerializeOptions {
    httpOnly?: boolean;
    secure?: boolean;
    sameSite?: "strict" | "lax" | "none" | boolean;
    path?: string;
    maxAge?: number;
  }
  export function parse(header: string): Record<string, string | undefined>;
  export function serialize(name: string, value: string, options?: SerializeOptions): string;
}
