#!/usr/bin/env python3
"""A receiver for the email event webhooks service, with the Python standard library only.

verify() checks a request as @mailhooks/verify does: the same checks in the same order, with
the same error codes (docs/receivers/python_receiver.integration.test.ts runs it on every vector of
packages/verify/test-vectors.json). Copy verify() into your application, or run:

    WEBHOOK_SECRET=whsec_... python3 python_receiver.py [--port 8080]
        a tiny HTTP server: POST /webhooks answers 204 once verified (each event is processed
        once per X-Service-Event-Id), else 401 with {"error": {"code", "message"}};
        during a secret rotation give both secrets: WEBHOOK_SECRET=whsec_old,whsec_new

    python3 python_receiver.py --vectors packages/verify/test-vectors.json
        prints the outcome of every test vector, one JSON object per line.
"""

import hashlib
import hmac
import json
import os
import re
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SIGNATURE_HEADER = "X-Service-Signature"
TIMESTAMP_HEADER = "X-Service-Timestamp"
# The event's id: the same on every retry and replay of an event, so the key to process it once.
# messageId is no such key: every event of one message (sent, delivered, opened...) shares it.
EVENT_ID_HEADER = "X-Service-Event-Id"
# [0-9], not \d: \d also matches other scripts' digits. fullmatch, not $: $ accepts a final newline.
_TIMESTAMP = re.compile(r"[0-9]{1,12}")
_SIGNATURE = re.compile(r"sha256=([0-9a-f]{64})")


class WebhookVerificationError(Exception):
    """A request to refuse (answer 401). code: missing_header, invalid_timestamp,
    timestamp_out_of_tolerance, invalid_signature or invalid_payload."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def _header(headers, name):
    """One header's value from a dict (keys in any case) or http.server's headers; None if absent.
    A repeated header is joined with ", " as Node and fetch join it (then it fails the format)."""
    if hasattr(headers, "get_all"):
        values = headers.get_all(name)
        return None if values is None else ", ".join(values)
    for key, value in headers.items():
        if key.lower() == name.lower():
            return value
    return None


def _reject_constant(name):
    # Python's json accepts NaN and Infinity; JSON (and JavaScript's parser) does not.
    raise ValueError(f"not JSON: {name}")


def verify(secrets, headers, raw_body, tolerance_seconds=300, now=None):
    """Verifies a request and returns its envelope {"event", "timestamp", "data"} (a dict).

    secrets: the webhook secret (str), or a list of them during a rotation (any may match).
    headers: a dict (any case) or the headers of http.server's request.
    raw_body: the body's bytes exactly as received, never a parsed or re-encoded body.
    tolerance_seconds: the largest distance between X-Service-Timestamp and now, either way.
    now: the receiver's clock in Unix seconds (default: time.time()).
    Raises WebhookVerificationError for a request to refuse, TypeError for wrong arguments.
    """
    if isinstance(secrets, str):
        secrets = [secrets]
    if not secrets or not all(isinstance(s, str) and s for s in secrets):
        raise TypeError("secrets must be a non-empty str or a non-empty list of non-empty str")
    if not isinstance(raw_body, (bytes, bytearray, memoryview)):
        raise TypeError("raw_body must be the request body's raw bytes: the signature covers the bytes sent, "
                        "and a parsed or re-encoded body no longer has them")
    body = bytes(raw_body)
    now = int(time.time()) if now is None else now

    timestamp = _header(headers, TIMESTAMP_HEADER)
    signature = _header(headers, SIGNATURE_HEADER)
    if not timestamp:
        raise WebhookVerificationError("missing_header", f"missing {TIMESTAMP_HEADER} header")
    if not signature:
        raise WebhookVerificationError("missing_header", f"missing {SIGNATURE_HEADER} header")
    if not _TIMESTAMP.fullmatch(timestamp):
        raise WebhookVerificationError("invalid_timestamp", f"{TIMESTAMP_HEADER} must be Unix seconds (digits only)")
    if abs(now - int(timestamp)) > tolerance_seconds:
        raise WebhookVerificationError("timestamp_out_of_tolerance", f"{TIMESTAMP_HEADER} is beyond the tolerance of {tolerance_seconds} s")
    match = _SIGNATURE.fullmatch(signature)
    if not match:
        raise WebhookVerificationError("invalid_signature", f'{SIGNATURE_HEADER} must be "sha256=" and 64 lowercase hex digits')

    message = timestamp.encode("ascii") + b"." + body
    matched = False
    for secret in secrets:  # every secret is tried, so timing does not tell which one matched
        expected = hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()
        if hmac.compare_digest(expected, match.group(1)):
            matched = True
    if not matched:
        raise WebhookVerificationError("invalid_signature", f"{SIGNATURE_HEADER} does not match the secret")

    try:
        # Strict UTF-8; a BOM stays in the text and json refuses it.
        envelope = json.loads(body.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise WebhookVerificationError("invalid_payload", "the signature is valid but the body is not UTF-8 JSON") from None
    timestamp_value = envelope.get("timestamp") if isinstance(envelope, dict) else None
    if not (isinstance(envelope, dict) and isinstance(envelope.get("event"), str)
            and isinstance(timestamp_value, (int, float)) and not isinstance(timestamp_value, bool)
            and isinstance(envelope.get("data"), dict)):
        raise WebhookVerificationError("invalid_payload", 'the signature is valid but the body is not an envelope {"event","timestamp","data"}')
    return envelope


def event_id(headers):
    """The request's X-Service-Event-Id (not signed; read it once verify() has passed).
    Raises WebhookVerificationError("missing_header") when it is absent or empty."""
    value = _header(headers, EVENT_ID_HEADER)
    if not value:
        raise WebhookVerificationError("missing_header", f"missing {EVENT_ID_HEADER} header")
    return value


def run_vectors(path):
    """Prints {"name", "outcome"} per vector of test-vectors.json, outcome as the file writes it."""
    import base64

    with open(path, encoding="utf-8") as file:
        vectors = json.load(file)["vectors"]
    for vector in vectors:
        try:
            envelope = verify(vector["secrets"], vector["headers"], base64.b64decode(vector["body_base64"]),
                              tolerance_seconds=vector["tolerance_seconds"], now=vector["now"])
            outcome = {"ok": True, "envelope": envelope}
        except WebhookVerificationError as error:
            outcome = {"ok": False, "error": error.code}
        print(json.dumps({"name": vector["name"], "outcome": outcome}, ensure_ascii=False))


def serve(secrets, port):
    """POST /webhooks: verify, then process each event id once (deliveries are at least once)."""
    processed = set()  # in production: a unique key in your database

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            if self.path.split("?")[0] != "/webhooks":
                return self._answer(404)
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                webhook = verify(secrets, self.headers, raw)
                key = event_id(self.headers)
            except WebhookVerificationError as error:
                return self._answer(401, {"error": {"code": error.code, "message": str(error)}})
            if key not in processed:
                print("processed", key, webhook["event"], webhook["data"].get("messageId", ""), flush=True)  # your processing here
                processed.add(key)
            self._answer(204)

        def _answer(self, status, body=None):
            data = b"" if body is None else json.dumps(body).encode("utf-8")
            self.send_response(status)
            if body is not None:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"listening on http://127.0.0.1:{server.server_address[1]}/webhooks", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--vectors"] and len(args) == 2:
        run_vectors(args[1])
    else:
        secrets = [s for s in os.environ.get("WEBHOOK_SECRET", "").split(",") if s]
        if not secrets:
            sys.exit("set WEBHOOK_SECRET (comma-separated during a rotation)")
        serve(secrets, int(args[1]) if args[:1] == ["--port"] and len(args) == 2 else 8080)
