#!/usr/bin/env python3
"""A stand-in for Anthropic's Messages API, for tests that run the real
Claude Code binary: it checks what the real API checks first (POST
/v1/messages, an x-api-key header, a JSON body naming a model and messages)
and answers in the API's own shapes, streamed (server-sent events) or not.

With --bash CMD it plays an agent that wants one tool call: its first answer
is a `tool_use` of the Bash tool running CMD; when the conversation carries
that tool's result, it answers with text quoting the result, so the test
sees what the command printed inside the sandbox. Without --bash it answers
PONG-FROM-STANDIN.

  anthropic_standin.py --addr A --port-file F --cert C --key K --api-key KEY
                       [--bash CMD] [--log FILE]

The port it listens on (TLS) is written to F once it is ready. Each request
is logged (method, path, model, whether the key matched) to --log.
"""
import argparse
import http.server
import json
import os
import ssl
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--addr", required=True)
ap.add_argument("--port-file", required=True)
ap.add_argument("--cert", required=True)
ap.add_argument("--key", required=True)
ap.add_argument("--api-key", required=True)
ap.add_argument("--bash")
ap.add_argument("--log", default="/dev/stderr")
args = ap.parse_args()
log = open(args.log, "a", buffering=1)


def tool_result_text(messages):
    """The text of the newest tool_result in the conversation, or None."""
    for m in reversed(messages):
        content = m.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                c = block.get("content")
                if isinstance(c, list):
                    c = "".join(x.get("text", "") for x in c if isinstance(x, dict))
                return str(c)
    return None


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def reply(self, code, obj):
        out = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_GET(self):
        log.write("GET %s\n" % self.path)
        self.reply(404, {"type": "error", "error": {"type": "not_found_error", "message": "no"}})

    def do_POST(self):
        n = int(self.headers.get("content-length", "0"))
        raw = self.rfile.read(n) if n else b""
        key_ok = self.headers.get("x-api-key") == args.api_key
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = None
        log.write("POST %s key=%s model=%s\n" % (self.path, "ok" if key_ok else "bad",
                                                 body.get("model") if isinstance(body, dict) else "-"))
        path = self.path.split("?")[0]
        if not key_ok:
            return self.reply(401, {"type": "error",
                                    "error": {"type": "authentication_error", "message": "invalid x-api-key"}})
        if not isinstance(body, dict) or "model" not in body:
            return self.reply(400, {"type": "error",
                                    "error": {"type": "invalid_request_error", "message": "bad body"}})
        if path == "/v1/messages/count_tokens":
            return self.reply(200, {"input_tokens": 10})
        if path != "/v1/messages" or not isinstance(body.get("messages"), list):
            return self.reply(404, {"type": "error", "error": {"type": "not_found_error", "message": path}})
        result = tool_result_text(body["messages"])
        tools = {t.get("name") for t in body.get("tools", []) if isinstance(t, dict)}
        if args.bash and result is None and "Bash" in tools:
            block = {"type": "tool_use", "id": "toolu_standin1", "name": "Bash",
                     "input": {"command": args.bash, "description": "run the test's command"}}
            stop = "tool_use"
        else:
            text = "PONG-FROM-STANDIN" if result is None else "TOOL-RESULT-BEGIN\n%s\nTOOL-RESULT-END" % result
            block = {"type": "text", "text": text}
            stop = "end_turn"
        msg = {"id": "msg_standin", "type": "message", "role": "assistant", "model": body["model"],
               "content": [], "stop_reason": None, "stop_sequence": None,
               "usage": {"input_tokens": 5, "output_tokens": 1}}
        if not body.get("stream"):
            msg["content"] = [block]
            msg["stop_reason"] = stop
            return self.reply(200, msg)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close")
        self.end_headers()

        def event(kind, data):
            self.wfile.write(("event: %s\ndata: %s\n\n" % (kind, json.dumps(data))).encode())

        event("message_start", {"type": "message_start", "message": msg})
        if block["type"] == "text":
            event("content_block_start", {"type": "content_block_start", "index": 0,
                                          "content_block": {"type": "text", "text": ""}})
            event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                          "delta": {"type": "text_delta", "text": block["text"]}})
        else:
            event("content_block_start", {"type": "content_block_start", "index": 0,
                                          "content_block": dict(block, input={})})
            event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                          "delta": {"type": "input_json_delta",
                                                    "partial_json": json.dumps(block["input"])}})
        event("content_block_stop", {"type": "content_block_stop", "index": 0})
        event("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                "usage": {"output_tokens": 3}})
        event("message_stop", {"type": "message_stop"})
        self.wfile.flush()
        self.close_connection = True


server = http.server.ThreadingHTTPServer((args.addr, 0), Handler)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(args.cert, args.key)
server.socket = ctx.wrap_socket(server.socket, server_side=True)
tmp = args.port_file + ".tmp"
with open(tmp, "w") as f:
    f.write(str(server.server_address[1]))
os.rename(tmp, args.port_file)
server.serve_forever()
