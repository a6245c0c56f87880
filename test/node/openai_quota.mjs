// The OpenAI Node SDK against sluice's quotas, as an application meets
// them: a rate refusal (429 rate_limit_exceeded with retry-after-ms) that
// the SDK retries by itself and then gets through, and a spent quota (429
// insufficient_quota with x-should-retry: false) that it does not retry.
// Run by test/integration/openai_sdk_test.cc; prints one JSON line of what
// it saw and exits 0, or prints the error and exits 1.
//
//   SLUICE_BASE_URL=http://127.0.0.1:PORT/v1 SLUICE_API_KEY=sk-sluice-... node openai_quota.mjs
import OpenAI from "openai";

const baseURL = process.env.SLUICE_BASE_URL;
const apiKey = process.env.SLUICE_API_KEY;
const model = process.env.SLUICE_MODEL ?? "mock-model";
const client = new OpenAI({ baseURL, apiKey, maxRetries: 2, timeout: 20000 });
const ask = (max_tokens) =>
  client.chat.completions.create({
    model,
    messages: [{ role: "user", content: "Say something about fairness." }],
    max_tokens,
  });
const out = {};

// The one request the window allows.
out.first = (await ask(8)).choices.length;
// The next is refused for the window; the SDK waits as told and retries.
const t0 = Date.now();
out.second = (await ask(8)).choices.length;
out.second_ms = Date.now() - t0;
// Larger than the token limit: never fits, not to be retried.
try {
  await ask(5000);
  out.too_large = "accepted";
} catch (e) {
  out.too_large = e instanceof OpenAI.RateLimitError ? `${e.status} ${e.code}` : String(e);
}
console.log(JSON.stringify(out));
