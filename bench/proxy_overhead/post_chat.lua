-- wrk script for bench/proxy_overhead.sh: POST a ~1 KB OpenAI-style
-- chat-completions request and print one machine-readable RESULT line.
--
-- Only wrk.method/body/headers are set (no request()/response() functions):
-- wrk then formats the request once per thread and never calls into Lua on
-- the hot path, which keeps the single wrk thread as cheap as possible.

local sentence = "Summarise the following support ticket in two sentences and "
  .. "suggest a next step for the on-call engineer. "
-- PROMPT_BYTES (bench/large_prompts.sh) sets the prompt's length; 900 by
-- default (a ~1 KB body).
local prompt_bytes = tonumber(os.getenv("PROMPT_BYTES") or "900")
local content = string.rep(sentence, math.ceil(prompt_bytes / #sentence)):sub(1, prompt_bytes)

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"model":"bench-model","messages":[{"role":"user","content":"'
  .. content .. '"}],"max_tokens":64}'

-- Errors = socket errors (connect/read/write/timeout) + wrk's status errors.
-- Note: wrk counts a response as a status error when status > 399; catching
-- 1xx/3xx as well would need a response() hook, which makes wrk parse every
-- response in Lua and would turn wrk into the bottleneck. The harness checks
-- for an exact 200 (with curl) before measuring each target.
done = function(summary, latency, _)
  local e = summary.errors
  local errors = e.connect + e.read + e.write + e.timeout + e.status
  local secs = summary.duration / 1e6 -- summary.duration is in microseconds
  io.write(string.format(
    "RESULT rps=%.1f p50_us=%d p99_us=%d errors=%d requests=%d body_bytes=%d\n",
    summary.requests / secs, latency:percentile(50), latency:percentile(99),
    errors, summary.requests, #wrk.body))
end
