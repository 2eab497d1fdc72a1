// The reference framing for tests/server/request_framer_test's differential test: Node's own
// HTTP/1.1 parser (llhttp), strict. Reads a JSON array of base64 byte streams from stdin; writes,
// for each, the byte offsets where llhttp completed a request (fed a byte at a time, so the offset
// is exact) and whether it stopped on an error: [{"ends": [..], "error": bool}, ...].
import { createRequire } from "node:module";
const require = createRequire(import.meta.url);
const { HTTPParser } = require("_http_common");

let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (d) => (input += d));
process.stdin.on("end", () => {
  const out = [];
  for (const b64 of JSON.parse(input)) {
    const bytes = Buffer.from(b64, "base64");
    const parser = new HTTPParser();
    parser.initialize(HTTPParser.REQUEST, {}, 0, 0);
    const ends = [];
    let at = 0;
    parser[HTTPParser.kOnHeaders] = () => {};
    parser[HTTPParser.kOnHeadersComplete] = () => 0;
    parser[HTTPParser.kOnBody] = () => {};
    parser[HTTPParser.kOnMessageComplete] = () => ends.push(at + 1);
    let error = false;
    for (at = 0; at < bytes.length; ++at) {
      const r = parser.execute(bytes.subarray(at, at + 1));
      if (r instanceof Error) {
        error = true;
        break;
      }
    }
    out.push({ ends, error });
  }
  process.stdout.write(JSON.stringify(out));
});
