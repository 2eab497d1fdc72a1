// Validates answers against a JSON schema with Ajv (draft 2020-12) and ajv-formats: a validator
// that shares no code with shrike's schema compiler. Usage: node validate.mjs SCHEMA ANSWERS
// where ANSWERS holds one JSON string per line (each answer's raw text, so that text which is not
// JSON at all is reported rather than lost). Exits 1 when any answer is invalid.
import { readFileSync } from "node:fs";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

const [schemaPath, answersPath] = process.argv.slice(2);
if (!schemaPath || !answersPath) {
  console.error("usage: node validate.mjs SCHEMA ANSWERS");
  process.exit(2);
}
// multipleOfPrecision: Ajv divides in floating point (0.3 / 0.1 = 2.9999999999999996), so a
// decimal multiple is checked to 9 decimals of the quotient instead of exactly.
const ajv = new Ajv2020({ strict: true, allErrors: true, multipleOfPrecision: 9 });
addFormats(ajv);
const validate = ajv.compile(JSON.parse(readFileSync(schemaPath, "utf8")));
const lines = readFileSync(answersPath, "utf8").split("\n").filter((l) => l.length > 0);
let valid = 0;
const failures = [];
for (const line of lines) {
  const text = JSON.parse(line);
  let value;
  try {
    value = JSON.parse(text);
  } catch (e) {
    failures.push(`not JSON (${e.message}): ${text}`);
    continue;
  }
  if (validate(value)) valid++;
  else failures.push(`${ajv.errorsText(validate.errors)}: ${text}`);
}
console.log(`ajv: ${valid}/${lines.length} answers valid`);
for (const f of failures.slice(0, 10)) console.log(`  invalid: ${f}`);
process.exit(failures.length === 0 && lines.length > 0 ? 0 : 1);
