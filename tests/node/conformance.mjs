// OpenAI's official Node SDK against a running `nexus serve`: completions, chat, streaming with
// usage, log-probabilities, model listing, and errors surfacing as the SDK's typed errors.
// Usage: node conformance.mjs BASE_URL MODEL [API_KEY]. Exits 1 naming the first failed check.
import OpenAI from "openai";

const [base, model, key] = process.argv.slice(2);
const client = new OpenAI({ baseURL: base, apiKey: key ?? "none", maxRetries: 0, timeout: 60000 });
let checks = 0;
function check(cond, what) {
  if (!cond) {
    console.error(`FAIL: ${what}`);
    process.exit(1);
  }
  ++checks;
}

const models = await client.models.list();
check(models.data.length === 1 && models.data[0].id === model, "models.list has the model");

const c = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 16, temperature: 0 });
check(c.object === "text_completion" && c.choices.length === 1, "completion shape");
check(typeof c.choices[0].text === "string" && c.choices[0].text.length > 0, "completion text");
check(c.choices[0].finish_reason === "length", "completion finish_reason");
check(c.usage.completion_tokens === 16 && c.usage.total_tokens === c.usage.prompt_tokens + 16, "completion usage");

const two = await client.completions.create({ model, prompt: ["Once upon a time", "One day"], max_tokens: 4, n: 2, temperature: 0.8, seed: 3 });
check(two.choices.length === 4 && two.choices.map((x) => x.index).join() === "0,1,2,3", "n x prompts choices");

const lp = await client.completions.create({ model, prompt: "Once", max_tokens: 3, temperature: 0, logprobs: 2 });
check(lp.choices[0].logprobs.tokens.length === 3 && lp.choices[0].logprobs.top_logprobs[0] !== undefined, "completion logprobs");

let text = "", last = null, usage = null;
const cs = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 16, temperature: 0, stream: true, stream_options: { include_usage: true } });
for await (const chunk of cs) {
  if (chunk.usage) usage = chunk.usage;
  if (chunk.choices.length) {
    text += chunk.choices[0].text;
    last = chunk.choices[0].finish_reason ?? last;
  }
}
check(text === c.choices[0].text, "streamed completion equals the plain one");
check(last === "length" && usage && usage.completion_tokens === 16, "streamed finish_reason and usage");

const messages = [{ role: "system", content: "You tell stories." }, { role: "user", content: "Tell me one." }];
const chat = await client.chat.completions.create({ model, messages, max_tokens: 12, temperature: 0 });
check(chat.object === "chat.completion" && chat.choices[0].message.role === "assistant", "chat shape");
check(typeof chat.choices[0].message.content === "string", "chat content");

let content = "", role = null;
const stream = await client.chat.completions.create({ model, messages, max_tokens: 12, temperature: 0, stream: true });
for await (const chunk of stream) {
  const d = chunk.choices[0]?.delta ?? {};
  if (d.role) role = d.role;
  if (d.content) content += d.content;
}
check(role === "assistant" && content === chat.choices[0].message.content, "streamed chat equals the plain one");

const clp = await client.chat.completions.create({ model, messages, max_tokens: 2, temperature: 0, logprobs: true, top_logprobs: 2 });
check(clp.choices[0].logprobs.content.length === 2 && clp.choices[0].logprobs.content[0].top_logprobs.length === 2, "chat logprobs");

const emb = await client.embeddings.create({ model, input: ["Once upon a time", "One day"] });
check(emb.data.length === 2 && emb.usage.prompt_tokens > 0, "embeddings shape");
const v = emb.data[0].embedding;
check(Array.isArray(v) && v.length > 0 && Math.abs(Math.hypot(...v) - 1) < 1e-4, "embeddings are unit vectors");
const embf = await client.embeddings.create({ model, input: "Once upon a time", encoding_format: "float" });
check(embf.data[0].embedding.every((x, i) => Math.abs(x - v[i]) < 1e-6), "float and base64 embeddings agree");

async function expectError(fn, status, what) {
  try {
    await fn();
  } catch (e) {
    check(e instanceof OpenAI.APIError && e.status === status && typeof e.message === "string", `${what}: ${e.status} ${e.message}`);
    return;
  }
  check(false, `${what}: no error`);
}
await expectError(() => client.completions.create({ model, prompt: "x", temperature: 9 }), 400, "out-of-range temperature");
await expectError(() => client.completions.create({ model: "gpt-4", prompt: "x" }), 404, "unknown model");
await expectError(() => client.chat.completions.create({ model, messages: [] }), 400, "empty messages");
if (key) {
  const bad = new OpenAI({ baseURL: base, apiKey: "wrong", maxRetries: 0 });
  await expectError(() => bad.models.list(), 401, "wrong API key");
}
console.log(`ok: ${checks} checks`);
