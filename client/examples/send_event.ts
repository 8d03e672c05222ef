// One signed rating event from Node 20 (built-in crypto and fetch), retried with backoff. Standard Webhooks.
import { createHmac, randomUUID } from "node:crypto";

const BASE_URL = process.env.BASE_URL ?? "http://127.0.0.1:8000";
const SOURCE = process.env.SOURCE ?? "my-product";
const SECRET = process.env.SECRET ?? ""; // whsec_... from source_create

function sign(secret: string, id: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.replace(/^whsec_/, ""), "base64");
  return "v1," + createHmac("sha256", key).update(`${id}.${timestamp}.${body}`).digest("base64");
}

export async function sendEvent(event: Record<string, unknown>, attempts = 5): Promise<unknown> {
  // The id is fixed before the first attempt, so a retry after a lost answer is a duplicate, not a second item.
  const withId = { id: `evt_${randomUUID().replaceAll("-", "")}`, ...event };
  const body = JSON.stringify(withId);
  const id = String(withId.id);
  for (let attempt = 1; ; attempt++) {
    const timestamp = Math.floor(Date.now() / 1000); // signed afresh: the server refuses timestamps 5 minutes off
    let status = 0;
    let answer: unknown = null;
    try {
      const response = await fetch(`${BASE_URL}/api/v1/sources/${encodeURIComponent(SOURCE)}/events`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "webhook-id": id,
          "webhook-timestamp": String(timestamp),
          "webhook-signature": sign(SECRET, id, timestamp, body),
        },
        body,
        signal: AbortSignal.timeout(10_000),
      });
      status = response.status;
      answer = await response.json().catch(() => null);
      if (response.ok) return answer; // 202 (or 207 for a batch with some invalid events)
    } catch (error) {
      answer = String(error); // no answer: retried
    }
    const retry = status === 0 || status === 429 || status >= 500;
    if (!retry || attempt >= attempts) throw new Error(`${status}: ${JSON.stringify(answer)}`);
    await new Promise((done) => setTimeout(done, Math.min(30_000, 500 * 2 ** attempt) * (0.5 + Math.random() / 2)));
  }
}

const result = await sendEvent({
  type: "feedback.rating",
  occurred_at: new Date().toISOString(),
  rating: "down",
  comment: "It edited main.py instead of utils.py",
  model: { name: "coder", version: "2.2" },
});
console.log(JSON.stringify(result));
