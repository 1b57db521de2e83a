/**
 * Fails when prisma/schema.prisma and the SQL of prisma/migrations disagree.
 *
 * No Prisma native engine is available (no `prisma migrate diff`), so the test builds two
 * descriptions of the same shape and compares them:
 * - expected: the schema parsed by Prisma's own WebAssembly parser (DMMF), turned into the
 *   tables, columns, enums, indexes and foreign keys Prisma Migrate would create;
 * - actual: a fresh scratch database with every migration applied, read back from pg_catalog.
 */
import { randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import path from "node:path";
import pg from "pg";
import { get_dmmf } from "@prisma/prisma-schema-wasm";
import { MIGRATIONS_DIR, migrate } from "./migrate.js";

const SCHEMA_PATH = path.resolve(MIGRATIONS_DIR, "../schema.prisma");
const ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres";

// ---------------------------------------------------------------------------------------------
// The shape both sides are reduced to
// ---------------------------------------------------------------------------------------------

interface ColumnShape {
  /** As pg's format_type() prints it (`text`, `timestamp(3) with time zone`, `text[]`), or `enum:<Name>`. */
  type: string;
  nullable: boolean;
  hasDefault: boolean;
}

interface IndexShape {
  table: string;
  columns: string[];
  /** One entry per column: true where the column is sorted DESC. */
  descending: boolean[];
  unique: boolean;
  primary: boolean;
  partial: boolean;
}

interface ForeignKeyShape {
  table: string;
  columns: string[];
  referencedTable: string;
  referencedColumns: string[];
  onDelete: string;
  onUpdate: string;
}

interface SchemaShape {
  /** table -> column -> shape */
  tables: Record<string, Record<string, ColumnShape>>;
  /** enum type -> values in order */
  enums: Record<string, string[]>;
  /** index name -> shape */
  indexes: Record<string, IndexShape>;
  /** constraint name -> shape */
  foreignKeys: Record<string, ForeignKeyShape>;
}

// ---------------------------------------------------------------------------------------------
// Expected: from the Prisma schema
// ---------------------------------------------------------------------------------------------

interface DmmfField {
  name: string;
  dbName?: string | null;
  kind: "scalar" | "enum" | "object" | "unsupported";
  type: string;
  isList: boolean;
  isRequired: boolean;
  hasDefaultValue: boolean;
  default?: unknown;
  nativeType?: [string, string[]] | null;
  relationFromFields?: string[];
  relationToFields?: string[];
  relationOnDelete?: string;
  relationOnUpdate?: string;
}
interface DmmfModel {
  name: string;
  dbName: string | null;
  fields: DmmfField[];
}
interface DmmfIndex {
  model: string;
  type: "id" | "unique" | "normal" | "fulltext";
  dbName?: string | null;
  fields: { name: string; sortOrder?: "asc" | "desc" }[];
}
interface Dmmf {
  datamodel: {
    models: DmmfModel[];
    enums: { name: string; dbName?: string | null; values: { name: string; dbName?: string | null }[] }[];
    indexes: DmmfIndex[];
  };
}

/** Parses schema text with Prisma's own parser; throws Prisma's message on an invalid schema. */
function parseDmmf(schemaText: string): Dmmf {
  return JSON.parse(get_dmmf(JSON.stringify({ prismaSchema: [["schema.prisma", schemaText]] }))) as Dmmf;
}

/** PostgreSQL type Prisma Migrate creates for a scalar, in format_type() spelling. */
const SCALAR_TYPES: Record<string, string> = {
  String: "text",
  Int: "integer",
  BigInt: "bigint",
  Boolean: "boolean",
  Float: "double precision",
  Decimal: "numeric(65,30)",
  // Prisma's default DateTime column is TIMESTAMP(3) without time zone.
  DateTime: "timestamp(3) without time zone",
  Json: "jsonb",
  Bytes: "bytea",
};

/** format_type() spelling of a `@db.*` native type; unknown ones are kept visible in the diff. */
function nativeTypeName([name, args]: [string, string[]]): string {
  const precision = args.length ? `(${args.join(",")})` : "";
  switch (name) {
    case "Timestamptz":
      return `timestamp${precision} with time zone`;
    case "Timestamp":
      return `timestamp${precision} without time zone`;
    case "VarChar":
      return `character varying${precision}`;
    case "Text":
      return "text";
    case "Uuid":
      return "uuid";
    case "Integer":
      return "integer";
    case "JsonB":
      return "jsonb";
    default:
      return `unmapped @db.${name}${precision}`;
  }
}

/** `enumDbNames` maps an enum's Prisma name to its type name in the database (`@@map`). */
function expectedColumnType(field: DmmfField, enumDbNames: Map<string, string>): string {
  const base =
    field.kind === "enum"
      ? `enum:${enumDbNames.get(field.type)}`
      : field.nativeType
        ? nativeTypeName(field.nativeType)
        : (SCALAR_TYPES[field.type] ?? `unmapped ${field.type}`);
  return field.isList ? `${base}[]` : base;
}

/** Defaults computed by Prisma Client, not by the database (nothing in the column's DDL). */
const CLIENT_SIDE_DEFAULTS = new Set(["uuid", "cuid", "nanoid", "ulid"]);

function expectedHasDbDefault(field: DmmfField): boolean {
  if (!field.hasDefaultValue) return false;
  const fn = field.default as { name?: string } | undefined;
  return !(fn && typeof fn === "object" && fn.name && CLIENT_SIDE_DEFAULTS.has(fn.name));
}

function expectedColumn(field: DmmfField, enumDbNames: Map<string, string>): ColumnShape {
  // Prisma Migrate writes scalar lists as `TEXT[]` without NOT NULL, whatever the arity.
  const nullable = field.isList || !field.isRequired;
  return { type: expectedColumnType(field, enumDbNames), nullable, hasDefault: expectedHasDbDefault(field) };
}

const tableOf = (model: DmmfModel) => model.dbName ?? model.name;
const columnOf = (field: DmmfField) => field.dbName ?? field.name;

/** Column names of `fieldNames` in `model`, in the given order. */
function columnsOf(model: DmmfModel, fieldNames: string[]): string[] {
  return fieldNames.map((name) => columnOf(model.fields.find((f) => f.name === name)!));
}

/**
 * Prisma's default index names: `<table>_pkey`, `<table>_<cols>_key`, `<table>_<cols>_idx`.
 * (Prisma shortens names over PostgreSQL's 63 bytes; none here is that long, and one that was
 * would show up in the diff rather than pass silently.)
 */
function defaultIndexName(table: string, columns: string[], type: DmmfIndex["type"]): string {
  if (type === "id") return `${table}_pkey`;
  return `${table}_${columns.join("_")}_${type === "unique" ? "key" : "idx"}`;
}

/** Prisma's referential actions in pg_constraint's spelling. */
const PRISMA_ACTIONS: Record<string, string> = {
  Cascade: "CASCADE",
  Restrict: "RESTRICT",
  NoAction: "NO ACTION",
  SetNull: "SET NULL",
  SetDefault: "SET DEFAULT",
};

function expectedForeignKey(model: DmmfModel, field: DmmfField, target: DmmfModel): [string, ForeignKeyShape] {
  const table = tableOf(model);
  const columns = columnsOf(model, field.relationFromFields!);
  // The DMMF does not expose a custom `map:` of @relation, so Prisma's default name is assumed.
  const name = `${table}_${columns.join("_")}_fkey`;
  // Prisma's defaults: Restrict on delete for a required relation, SetNull for an optional one;
  // Cascade on update.
  const onDelete = field.relationOnDelete ?? (field.isRequired ? "Restrict" : "SetNull");
  return [
    name,
    {
      table,
      columns,
      referencedTable: tableOf(target),
      referencedColumns: columnsOf(target, field.relationToFields!),
      onDelete: PRISMA_ACTIONS[onDelete],
      onUpdate: PRISMA_ACTIONS[field.relationOnUpdate ?? "Cascade"],
    },
  ];
}

/**
 * Indexes the migrations create that Prisma's schema language cannot express (a `WHERE`
 * predicate), each with its reason. They are expected as written here, so a migration that drops
 * or changes one still fails the comparison.
 */
const SQL_ONLY_INDEXES: Record<string, IndexShape & { reason: string }> = {
  deliveries_destination_attempt_key: {
    reason: "one initial or retry row per (destination, attempt); replays of a destination (attempt 0) are not limited",
    table: "deliveries",
    columns: ["destination_id", "attempt"],
    descending: [false, false],
    unique: true,
    primary: false,
    partial: true,
  },
  work_items_waiting_idx: {
    reason: "a webhook's waiting work, the longest due first: what the claim takes",
    table: "work_items",
    columns: ["webhook_id", "due_at", "id"],
    descending: [false, false, false],
    unique: false,
    primary: false,
    partial: true,
  },
  work_items_leased_idx: {
    reason: "a deployment's leases by expiry: the live ones counted, the expired ones claimed again",
    table: "work_items",
    columns: ["queue_prefix", "leased_until"],
    descending: [false, false],
    unique: false,
    primary: false,
    partial: true,
  },
  webhooks_listen_idx: {
    reason: "the listen webhooks not disabled, by their last pull: what LISTEN_IDLE_HOURS looks at",
    table: "webhooks",
    columns: ["last_pulled_at"],
    descending: [false],
    unique: false,
    primary: false,
    partial: true,
  },
  work_items_pulled_idx: {
    reason: "what a listen webhook's developer holds, by expiry: counted and taken back by the next pull",
    table: "work_items",
    columns: ["webhook_id", "leased_until"],
    descending: [false, false],
    unique: false,
    primary: false,
    partial: true,
  },
  work_items_bypass_idx: {
    reason: "replays to a target_url, sent while their webhook is paused",
    table: "work_items",
    columns: ["webhook_id", "due_at"],
    descending: [false, false],
    unique: false,
    primary: false,
    partial: true,
  },
  webhook_queues_ready_idx: {
    reason: "the round of webhooks whose work waits, in the order they are served",
    table: "webhook_queues",
    columns: ["queue_prefix", "ready_at"],
    descending: [false, false],
    unique: false,
    primary: false,
    partial: true,
  },
  webhooks_account_id_id_unscoped_idx: {
    reason: "ingest's lookup of an account's enabled webhooks of every inbox (inbox_ids null)",
    table: "webhooks",
    columns: ["account_id", "id"],
    descending: [false, false],
    unique: false,
    primary: false,
    partial: true,
  },
};

/** What `prisma migrate` would create for `schemaText`, plus SQL_ONLY_INDEXES. */
function expectedFromPrisma(schemaText: string): SchemaShape {
  const { datamodel } = parseDmmf(schemaText);
  const shape: SchemaShape = { tables: {}, enums: {}, indexes: {}, foreignKeys: {} };
  const modelsByName = new Map(datamodel.models.map((m) => [m.name, m]));
  const enumDbNames = new Map(datamodel.enums.map((e) => [e.name, e.dbName ?? e.name]));
  for (const model of datamodel.models) {
    const columns: Record<string, ColumnShape> = {};
    for (const field of model.fields) {
      if (field.kind === "object") {
        // Only the side holding `fields:` has a foreign key.
        if (field.relationFromFields?.length) {
          const [name, fk] = expectedForeignKey(model, field, modelsByName.get(field.type)!);
          shape.foreignKeys[name] = fk;
        }
        continue;
      }
      columns[columnOf(field)] = expectedColumn(field, enumDbNames);
    }
    shape.tables[tableOf(model)] = columns;
  }
  for (const e of datamodel.enums) shape.enums[enumDbNames.get(e.name)!] = e.values.map((v) => v.dbName ?? v.name);
  for (const index of datamodel.indexes) {
    const model = modelsByName.get(index.model)!;
    const table = tableOf(model);
    const columns = columnsOf(
      model,
      index.fields.map((f) => f.name),
    );
    shape.indexes[index.dbName ?? defaultIndexName(table, columns, index.type)] = {
      table,
      columns,
      descending: index.fields.map((f) => f.sortOrder === "desc"),
      unique: index.type === "id" || index.type === "unique",
      primary: index.type === "id",
      partial: false,
    };
  }
  for (const [name, { reason: _reason, ...index }] of Object.entries(SQL_ONLY_INDEXES)) shape.indexes[name] = index;
  return shape;
}

// ---------------------------------------------------------------------------------------------
// Actual: from a migrated database
// ---------------------------------------------------------------------------------------------

/**
 * Prisma's bookkeeping table, created by `migrate` and not part of the data model. The daily
 * partitions of a partitioned table (event_payloads) are not either: the model describes the
 * partitioned table itself, and its partitions come and go with retention (relispartition).
 */
const IGNORED_TABLES = ["_prisma_migrations"];

async function readColumns(client: pg.Client): Promise<SchemaShape["tables"]> {
  const { rows } = await client.query<{ table_name: string; column_name: string; type: string; nullable: boolean; has_default: boolean }>(
    `SELECT c.relname AS table_name, a.attname AS column_name, a.attnotnull = false AS nullable,
            a.atthasdef AS has_default,
            CASE WHEN t.typtype = 'e' THEN 'enum:' || t.typname
                 WHEN et.typtype = 'e' THEN 'enum:' || et.typname || '[]'
                 ELSE format_type(a.atttypid, a.atttypmod) END AS type
       FROM pg_class c
       JOIN pg_namespace n ON n.oid = c.relnamespace
       JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
       JOIN pg_type t ON t.oid = a.atttypid
       LEFT JOIN pg_type et ON et.oid = t.typelem AND t.typcategory = 'A'
      WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition AND c.relname <> ALL($1)
      ORDER BY c.relname, a.attnum`,
    [IGNORED_TABLES],
  );
  const tables: SchemaShape["tables"] = {};
  for (const r of rows) (tables[r.table_name] ??= {})[r.column_name] = { type: r.type, nullable: r.nullable, hasDefault: r.has_default };
  return tables;
}

async function readEnums(client: pg.Client): Promise<SchemaShape["enums"]> {
  const { rows } = await client.query<{ name: string; values: string[] }>(
    `SELECT t.typname AS name, array_agg(e.enumlabel::text ORDER BY e.enumsortorder) AS values
       FROM pg_type t
       JOIN pg_namespace n ON n.oid = t.typnamespace
       JOIN pg_enum e ON e.enumtypid = t.oid
      WHERE n.nspname = 'public'
      GROUP BY t.typname`,
  );
  return Object.fromEntries(rows.map((r) => [r.name, r.values]));
}

async function readIndexes(client: pg.Client): Promise<SchemaShape["indexes"]> {
  // indkey is an int2vector (0-based); indnkeyatts leaves out INCLUDE columns.
  const { rows } = await client.query<{ name: string } & IndexShape>(
    `SELECT i.relname AS name, t.relname AS "table", x.indisunique AS "unique", x.indisprimary AS "primary",
            x.indpred IS NOT NULL AS partial,
            array(SELECT a.attname::text FROM generate_series(1, x.indnkeyatts) k
                    JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = x.indkey[k - 1]
                   ORDER BY k) AS columns,
            array(SELECT pg_index_column_has_property(x.indexrelid, k, 'desc')
                    FROM generate_series(1, x.indnkeyatts) k ORDER BY k) AS descending
       FROM pg_index x
       JOIN pg_class i ON i.oid = x.indexrelid
       JOIN pg_class t ON t.oid = x.indrelid
       JOIN pg_namespace n ON n.oid = t.relnamespace
      WHERE n.nspname = 'public' AND NOT t.relispartition AND t.relname <> ALL($1)`,
    [IGNORED_TABLES],
  );
  return Object.fromEntries(rows.map(({ name, ...index }) => [name, index]));
}

async function readForeignKeys(client: pg.Client): Promise<SchemaShape["foreignKeys"]> {
  const { rows } = await client.query<{ name: string } & ForeignKeyShape>(
    `SELECT c.conname AS name, t.relname AS "table", rt.relname AS "referencedTable",
            array(SELECT a.attname::text FROM unnest(c.conkey) WITH ORDINALITY k(attnum, ord)
                    JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum ORDER BY k.ord) AS columns,
            array(SELECT a.attname::text FROM unnest(c.confkey) WITH ORDINALITY k(attnum, ord)
                    JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.attnum ORDER BY k.ord) AS "referencedColumns",
            ${actionName("c.confdeltype")} AS "onDelete", ${actionName("c.confupdtype")} AS "onUpdate"
       FROM pg_constraint c
       JOIN pg_class t ON t.oid = c.conrelid
       JOIN pg_class rt ON rt.oid = c.confrelid
       JOIN pg_namespace n ON n.oid = t.relnamespace
      WHERE c.contype = 'f' AND n.nspname = 'public' AND t.relname <> ALL($1)`,
    [IGNORED_TABLES],
  );
  return Object.fromEntries(rows.map(({ name, ...fk }) => [name, fk]));
}

/** SQL turning pg_constraint's one-letter action code into its SQL name. */
function actionName(column: string): string {
  return `CASE ${column} WHEN 'a' THEN 'NO ACTION' WHEN 'r' THEN 'RESTRICT' WHEN 'c' THEN 'CASCADE'
                         WHEN 'n' THEN 'SET NULL' WHEN 'd' THEN 'SET DEFAULT' END`;
}

/** The shape of the `public` schema of the database at `url`. */
async function actualFromDatabase(url: string): Promise<SchemaShape> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return {
      tables: await readColumns(client),
      enums: await readEnums(client),
      indexes: await readIndexes(client),
      foreignKeys: await readForeignKeys(client),
    };
  } finally {
    await client.end();
  }
}

// ---------------------------------------------------------------------------------------------
// The comparison
// ---------------------------------------------------------------------------------------------

const show = (value: unknown) => JSON.stringify(value);

/**
 * Compares two keyed collections both ways: a line for each key only in `expected` or only in
 * `actual`, and `compare`'s lines for keys in both. `label` names an item in those lines.
 */
function diffKeyed<T>(
  label: (name: string) => string,
  expected: Record<string, T>,
  actual: Record<string, T>,
  compare: (name: string, e: T, a: T) => string[],
): string[] {
  const out: string[] = [];
  for (const name of Object.keys(expected).sort()) {
    if (!(name in actual)) out.push(`${label(name)}: in schema.prisma, missing from the migrations`);
    else out.push(...compare(name, expected[name], actual[name]));
  }
  for (const name of Object.keys(actual).sort()) {
    if (!(name in expected)) out.push(`${label(name)}: created by the migrations, not in schema.prisma`);
  }
  return out;
}

/** One line per property of `e` whose value differs in `a`. */
function diffProperties(label: string, e: object, a: object): string[] {
  const actual = a as Record<string, unknown>;
  return Object.entries(e)
    .filter(([key, value]) => show(value) !== show(actual[key]))
    .map(([key, value]) => `${label}: ${key} is ${show(actual[key])} in the migrations, ${show(value)} in schema.prisma`);
}

/** Every difference between the schema and the database, as readable lines; [] when none. */
function diffSchema(expected: SchemaShape, actual: SchemaShape): string[] {
  const diffColumns = (table: string, e: Record<string, ColumnShape>, a: Record<string, ColumnShape>) =>
    diffKeyed(
      (column) => `column ${table}.${column}`,
      e,
      a,
      (column, ec, ac) => diffProperties(`column ${table}.${column}`, ec, ac),
    );
  return [
    ...diffKeyed((name) => `table ${name}`, expected.tables, actual.tables, diffColumns),
    ...diffKeyed(
      (name) => `enum ${name}`,
      expected.enums,
      actual.enums,
      (name, e, a) => diffProperties(`enum ${name}`, { values: e }, { values: a }),
    ),
    ...diffKeyed(
      (name) => `index ${name}`,
      expected.indexes,
      actual.indexes,
      (name, e, a) => diffProperties(`index ${name}`, e, a),
    ),
    ...diffKeyed(
      (name) => `foreign key ${name}`,
      expected.foreignKeys,
      actual.foreignKeys,
      (name, e, a) => diffProperties(`foreign key ${name}`, e, a),
    ),
  ];
}

// ---------------------------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------------------------

let schemaText: string;
let migrated: SchemaShape;

/** Runs `fn` on a scratch database that exists only for its duration. */
async function withScratchDatabase<T>(fn: (url: string) => Promise<T>): Promise<T> {
  const name = `webhooks_drift_${randomBytes(6).toString("hex")}`;
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE "${name}"`);
    const url = new URL(ADMIN_URL);
    url.pathname = `/${name}`;
    return await fn(url.toString());
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    await admin.end();
  }
}

beforeAll(async () => {
  schemaText = await readFile(SCHEMA_PATH, "utf8");
  migrated = await withScratchDatabase(async (url) => {
    await migrate(url, MIGRATIONS_DIR);
    return actualFromDatabase(url);
  });
});

describe("prisma/schema.prisma vs prisma/migrations", () => {
  it("describe the same tables, columns, enums, indexes and foreign keys", () => {
    expect(diffSchema(expectedFromPrisma(schemaText), migrated)).toEqual([]);
  });

  it("read something: the comparison is not vacuous", () => {
    expect(Object.keys(migrated.tables)).toEqual(expect.arrayContaining(["accounts", "events", "deliveries"]));
    expect(migrated.tables.webhooks.events).toEqual({ type: "text[]", nullable: true, hasDefault: false });
    expect(migrated.enums.DeliveryStatus).toEqual(["pending", "delivered", "failed", "cancelled"]);
    expect(Object.values(migrated.indexes).some((index) => index.descending.includes(true))).toBe(true);
    expect(migrated.foreignKeys.destinations_event_id_fkey).toMatchObject({ referencedTable: "events", onDelete: "RESTRICT" });
  });
});

// Each test edits a copy of the real schema (the edits tolerate re-alignment of the columns, as
// other changes to the schema may move them) and expects exactly the lines that edit adds to the
// real diff, so that a real drift fails the test above and only it.
describe("diffSchema catches drift", () => {
  /** `text` with the first match of `pattern` replaced; throws if nothing matches. */
  function edit(text: string, pattern: RegExp, replacement: string): string {
    if (!pattern.test(text)) throw new Error(`schema.prisma no longer matches ${pattern}`);
    return text.replace(pattern, replacement);
  }

  /** The lines of diffSchema(expected, actual) that the real schema and database do not produce. */
  function linesAddedBy(expected: SchemaShape, actual: SchemaShape = migrated): string[] {
    const baseline = new Set(diffSchema(expectedFromPrisma(schemaText), migrated));
    return diffSchema(expected, actual).filter((line) => !baseline.has(line));
  }

  it("reports a field the migrations lack and a changed nullability", () => {
    let altered = edit(schemaText, /\n(\s*)@@map\("accounts"\)/, '\n$1plan String @default("free")\n$1@@map("accounts")');
    altered = edit(altered, /(\n\s*name\s+)String\?/, "$1String");
    expect(linesAddedBy(expectedFromPrisma(altered))).toEqual([
      "column accounts.plan: in schema.prisma, missing from the migrations",
      "column api_keys.name: nullable is true in the migrations, false in schema.prisma",
    ]);
  });

  it("reports a changed column type, enum order and a missing index declaration", () => {
    let altered = edit(schemaText, /(\n\s*attempt\s+)Int\b/, "$1String");
    altered = edit(altered, /(enum DeliveryStatus \{\s*pending\s*)delivered(\s*)failed/, "$1failed$2delivered");
    altered = edit(altered, /\n\s*@@index\(\[webhookId\]\)/, "");
    expect(linesAddedBy(expectedFromPrisma(altered))).toEqual([
      'column deliveries.attempt: type is "integer" in the migrations, "text" in schema.prisma',
      'enum DeliveryStatus: values is ["pending","delivered","failed","cancelled"] in the migrations, ["pending","failed","delivered","cancelled"] in schema.prisma',
      "index deliveries_webhook_id_idx: created by the migrations, not in schema.prisma",
    ]);
  });

  it("reports a sort order that differs", () => {
    const actual: SchemaShape = structuredClone(migrated);
    const [name, index] = Object.entries(actual.indexes).find(([, i]) => i.descending.includes(true))!;
    index.descending = index.descending.map(() => false);
    expect(linesAddedBy(expectedFromPrisma(schemaText), actual)).toEqual([
      expect.stringMatching(
        new RegExp(`^index ${name}: descending is \\[false(,false)*\\] in the migrations, \\[.*true.*\\] in schema\\.prisma$`),
      ),
    ]);
  });

  it("reports database objects the schema does not describe", () => {
    const actual: SchemaShape = structuredClone(migrated);
    actual.tables.events.legacy_flag = { type: "boolean", nullable: true, hasDefault: false };
    actual.tables.audit_scratch = { id: { type: "text", nullable: false, hasDefault: false } };
    delete actual.foreignKeys.destinations_webhook_id_fkey;
    expect(linesAddedBy(expectedFromPrisma(schemaText), actual)).toEqual([
      "column events.legacy_flag: created by the migrations, not in schema.prisma",
      "table audit_scratch: created by the migrations, not in schema.prisma",
      "foreign key destinations_webhook_id_fkey: in schema.prisma, missing from the migrations",
    ]);
  });
});
