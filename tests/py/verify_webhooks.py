"""Verify webhook messages captured by the tests with the official `standardwebhooks` package
(an implementation independent of elicitd's).

Usage: python3 verify_webhooks.py SECRET MESSAGES_JSON
MESSAGES_JSON is a list of {"headers": {...}, "body": "..."}. Prints one JSON line per message:
{"ok": true, "id": ..., "type": ...} or {"ok": false, "error": ...}. Exit code 0 when every
message verifies.
"""
import json
import sys

from standardwebhooks.webhooks import Webhook


def main() -> int:
    secret, path = sys.argv[1], sys.argv[2]
    hook = Webhook(secret)
    failed = 0
    with open(path, encoding="utf-8") as f:
        messages = json.load(f)
    for m in messages:
        try:
            payload = hook.verify(m["body"], m["headers"])
            print(json.dumps({"ok": True, "id": m["headers"].get("webhook-id"),
                              "type": payload.get("type")}))
        except Exception as e:  # noqa: BLE001 - report every failure
            failed += 1
            print(json.dumps({"ok": False, "error": f"{type(e).__name__}: {e}"}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
