// Drives `shrike serve` with the official openai npm package. Run by tests/server's gtest
// (OpenAiClient.*), which starts the server and passes its address:
//   SHRIKE_BASE_URL=http://127.0.0.1:PORT/v1 SHRIKE_API_KEY=KEY SHRIKE_MODEL=ID node test.mjs
// Exits 0 when every check passes; otherwise prints what failed and exits 1.
import OpenAI from 'openai';

const baseURL = process.env.SHRIKE_BASE_URL;
const apiKey = process.env.SHRIKE_API_KEY;
const model = process.env.SHRIKE_MODEL;
if (!baseURL || !apiKey || !model) {
  console.error('set SHRIKE_BASE_URL, SHRIKE_API_KEY and SHRIKE_MODEL');
  process.exit(2);
}

// No retries: a 4xx/5xx must surface as the error the SDK builds from our body.
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

const messages = [
  { role: 'system', content: 'You are brief.' },
  { role: 'user', content: 'Tell me about cats.' },
];

async function nonStreamingChat() {
  // ignore_eos is a shrike (and vLLM) extension; the SDK passes unknown fields through.
  const r = await client.chat.completions.create({ model, messages, max_tokens: 8, ignore_eos: true });
  check(r.object === 'chat.completion', `object ${r.object}`);
  check(r.model === model, `model ${r.model}`);
  check(r.choices.length === 1, 'one choice');
  check(r.choices[0].message.role === 'assistant', 'assistant role');
  check(typeof r.choices[0].message.content === 'string', 'string content');
  check(r.choices[0].finish_reason === 'length', `finish_reason ${r.choices[0].finish_reason}`);
  check(r.usage.completion_tokens === 8, `completion_tokens ${r.usage.completion_tokens}`);
  check(r.usage.total_tokens === r.usage.prompt_tokens + 8, 'total_tokens');
  return r.choices[0].message.content;
}

async function streamingChat(expected) {
  const stream = await client.chat.completions.create({
    model, messages, max_tokens: 8, ignore_eos: true, stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let finish = null;
  let usage = null;
  let chunks = 0;
  let sawRole = false;
  for await (const chunk of stream) {  // the SDK stops at data: [DONE]
    check(chunk.object === 'chat.completion.chunk', `chunk object ${chunk.object}`);
    if (chunk.usage) usage = chunk.usage;
    if (chunk.choices.length === 0) continue;
    chunks++;
    const c = chunk.choices[0];
    if (c.delta.role) sawRole = c.delta.role === 'assistant';
    text += c.delta.content ?? '';
    if (c.finish_reason) finish = c.finish_reason;
  }
  check(chunks >= 2, `chunks ${chunks}`);
  check(sawRole, 'a delta with role assistant');
  check(finish === 'length', `finish_reason ${finish}`);
  check(usage && usage.completion_tokens === 8, `usage ${JSON.stringify(usage)}`);
  check(text === expected, `streamed text ${JSON.stringify(text)} != ${JSON.stringify(expected)}`);
}

async function completions() {
  const r = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 5, ignore_eos: true });
  check(r.object === 'text_completion', `object ${r.object}`);
  check(typeof r.choices[0].text === 'string', 'text');
  check(r.usage.completion_tokens === 5, `completion_tokens ${r.usage.completion_tokens}`);

  const stream = await client.completions.create({
    model, prompt: 'Once upon a time', max_tokens: 5, ignore_eos: true, stream: true,
  });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
  check(text === r.choices[0].text, `streamed completion ${JSON.stringify(text)} != ${JSON.stringify(r.choices[0].text)}`);
}

async function badRequest() {
  try {
    await client.chat.completions.create({ model, messages, max_tokens: -1 });
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError, `BadRequestError, got ${e?.constructor?.name}: ${e}`);
    check(e.status === 400, `status ${e.status}`);
    check(e.type === 'invalid_request_error', `type ${e.type}`);
    check(e.param === 'max_tokens', `param ${e.param}`);
    check(typeof e.error?.message === 'string' && e.error.message.length > 0, 'error message');
    return;
  }
  throw new Error('max_tokens -1 was accepted');
}

async function otherErrors() {
  const wrongKey = new OpenAI({ baseURL, apiKey: 'sk-wrong', maxRetries: 0 });
  try {
    await wrongKey.models.list();
    throw new Error('a wrong key was accepted');
  } catch (e) {
    check(e instanceof OpenAI.AuthenticationError, `AuthenticationError, got ${e?.constructor?.name}: ${e}`);
    check(e.status === 401, `status ${e.status}`);
  }
  try {
    await client.chat.completions.create({ model: 'no-such-model', messages, max_tokens: 1 });
    throw new Error('an unknown model was accepted');
  } catch (e) {
    check(e instanceof OpenAI.NotFoundError, `NotFoundError, got ${e?.constructor?.name}: ${e}`);
    check(e.code === 'model_not_found', `code ${e.code}`);
  }
}

async function models() {
  const list = await client.models.list();
  const ids = list.data.map((m) => m.id);
  check(ids.length === 1 && ids[0] === model, `models ${JSON.stringify(ids)}`);
}

let failed = false;
async function step(name, fn) {
  try {
    const out = await fn();
    console.log(`ok   ${name}`);
    return out;
  } catch (e) {
    failed = true;
    console.log(`FAIL ${name}: ${e?.stack ?? e}`);
    return undefined;
  }
}

const chatText = await step('non-streaming chat', nonStreamingChat);
await step('streaming chat matches it', () => streamingChat(chatText));
await step('completions (plain and streaming)', completions);
await step('400 as BadRequestError', badRequest);
await step('401 and 404 errors', otherErrors);
await step('models.list', models);
process.exit(failed ? 1 : 0);
