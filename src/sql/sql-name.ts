import { InvalidArgumentError } from "../errors.js";

/**
 * The SQL name an option gives (a table, a sequence), used in statements as written: `value`, or
 * `fallback` when it is undefined. Throws an InvalidArgumentError naming `option`, saying what is
 * `expected`, unless the name matches `pattern`.
 */
export function sqlName(option: string, value: unknown, fallback: string, pattern: RegExp, expected: string): string {
  const name = value === undefined ? fallback : value;
  if (typeof name !== "string" || !pattern.test(name)) throw new InvalidArgumentError(option, expected, name);
  return name;
}
