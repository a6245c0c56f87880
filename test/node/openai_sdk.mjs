// The OpenAI Node SDK (npm `openai`) as a tenant's application would use
// it: against sluice's HTTPS listener (its private CA given to Node by
// NODE_EXTRA_CA_CERTS) with a sluice API key. Run by
// test/integration/openai_sdk_test.cc; prints one JSON line of what it saw
// and exits 0, or prints the error and exits 1.
//
//   SLUICE_BASE_URL=https://127.0.0.1:PORT/v1 SLUICE_API_KEY=sk-sluice-... \
//   NODE_EXTRA_CA_CERTS=ca.pem node openai_sdk.mjs
import OpenAI from "openai";

const baseURL = process.env.SLUICE_BASE_URL;
const apiKey = process.env.SLUICE_API_KEY;
const model = process.env.SLUICE_MODEL ?? "mock-model";
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 20000 });
const out = {};

// Not streaming.
const done = await client.chat.completions.create({
  model,
  messages: [{ role: "user", content: "Say something about fairness." }],
  max_tokens: 8,
});
out.text = done.choices[0].message.content;
out.completion_tokens = done.usage?.completion_tokens ?? null;

// Streaming: every chunk an SSE event the SDK parsed.
const stream = await client.chat.completions.create({
  model,
  messages: [{ role: "user", content: "Stream something." }],
  max_tokens: 8,
  stream: true,
});
out.chunks = 0;
out.streamed = "";
for await (const chunk of stream) {
  out.chunks += 1;
  out.streamed += chunk.choices[0]?.delta?.content ?? "";
}

// A wrong key: the SDK's own AuthenticationError (401 invalid_api_key).
const wrong = new OpenAI({ baseURL, apiKey: "sk-sluice-wrong", maxRetries: 0 });
try {
  await wrong.chat.completions.create({ model, messages: [{ role: "user", content: "x" }] });
  out.wrong_key = "accepted";
} catch (e) {
  out.wrong_key = e instanceof OpenAI.AuthenticationError ? `${e.status} ${e.code}` : String(e);
}

// The models this tenant may use.
const models = await client.models.list();
out.models = models.data.map((m) => m.id);

console.log(JSON.stringify(out));
