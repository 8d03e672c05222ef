#!/usr/bin/env bash
# One signed rating event with curl and openssl (Standard Webhooks). Needs bash, openssl, curl, base64, od.
# BASE_URL, SOURCE and SECRET come from the environment (SECRET is the whsec_... that source_create printed).
set -euo pipefail
BASE_URL="${BASE_URL:-http://127.0.0.1:8000}"; SOURCE="${SOURCE:-my-product}"; SECRET="${SECRET:?set SECRET=whsec_...}"
ID="${EVENT_ID:-evt_$(openssl rand -hex 12)}"   # keep the id when you retry: a resend is then a duplicate, not a second item
BODY=$(printf '{"id":"%s","type":"feedback.rating","occurred_at":"%s","rating":"down","comment":"It edited main.py instead of utils.py","model":{"name":"coder","version":"2.2"}}' \
  "$ID" "$(date -u +%Y-%m-%dT%H:%M:%SZ)")
KEY=$(printf '%s' "${SECRET#whsec_}" | base64 -d | od -An -vtx1 | tr -d ' \n')
for attempt in 1 2 3 4 5; do
  TS=$(date +%s)   # signed afresh on every attempt: the server refuses timestamps 5 minutes off
  SIG=$(printf '%s' "$ID.$TS.$BODY" | openssl dgst -sha256 -mac HMAC -macopt "hexkey:$KEY" -binary | base64 | tr -d '\n')
  STATUS=$(curl -sS -o /dev/stderr -w '%{http_code}' -X POST "$BASE_URL/api/v1/sources/$SOURCE/events" \
    -H 'content-type: application/json' -H "webhook-id: $ID" -H "webhook-timestamp: $TS" \
    -H "webhook-signature: v1,$SIG" --data-binary "$BODY") || STATUS=000
  case "$STATUS" in
    2??) echo; exit 0 ;;
    000|429|5??) sleep $((2 ** attempt)) ;;   # no answer, throttled or a server error: back off and resend
    *) echo; exit 1 ;;                        # 4xx: the request itself is wrong; resending will not help
  esac
done
exit 1
