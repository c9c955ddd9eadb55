"""A moto S3 server for the lake tests, run as a subprocess on 127.0.0.1.

Why a subprocess and not `ThreadedMotoServer` in the test process: some deltalake calls
(`DeltaTable.history()` in deltalake 1.6.6) hold the GIL while they wait for the HTTP answer, so a
server thread in the same interpreter can never answer: the test deadlocks.

Besides moto's own API the server has a small control surface under `/_ctl/` for the tests:
- `GET /_ctl/log`: the requests seen since the last reset, as JSON
  `[[method, path, query, if_none_match, if_match], ...]`;
- `POST /_ctl/reset`: clear the log;
- `POST /_ctl/arm` with JSON `{"pid": P, "method": "PUT", "pattern": REGEX, "when": "before"|"after"}`:
  the next request whose method and path match gets process P killed with SIGKILL, either
  before the request is handled (it is then answered 500 and not applied) or after (it is
  applied, the client never hears back). One shot. `"when": "lose-answer"` kills nobody: the
  request is applied and answered 500, as if the answer had been lost. `"when": "deny"` kills
  nobody either: the request is not applied and answered 403 (clients do not retry it), a read
  or write that fails once per shot. `"when": "delay"` (with `"seconds": S`) kills nobody: the
  request waits S seconds, then is applied and answered (a stalled write landing late), while
  the server answers other requests;
- `POST /_ctl/disarm`: drop every shot not fired yet.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
import time
from typing import Any

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import make_server


def main() -> None:
    app = DomainDispatcherApplication(create_backend_app)
    lock = threading.Lock()
    log: list[list[str]] = []
    armed: list[dict[str, Any]] = []

    def reply(start_response: Any, status: str, body: bytes) -> list[bytes]:
        start_response(status, [("Content-Type", "application/json")])
        return [body]

    def wrapped(environ: dict[str, Any], start_response: Any) -> Any:
        method = environ["REQUEST_METHOD"]
        path = environ.get("PATH_INFO", "")
        if path.startswith("/_ctl/"):
            if path == "/_ctl/log":
                with lock:
                    return reply(start_response, "200 OK", json.dumps(log).encode())
            if path == "/_ctl/reset":
                with lock:
                    log.clear()
                return reply(start_response, "200 OK", b"{}")
            if path == "/_ctl/disarm":
                with lock:
                    armed.clear()
                return reply(start_response, "200 OK", b"{}")
            if path == "/_ctl/arm":
                size = int(environ.get("CONTENT_LENGTH") or 0)
                spec = json.loads(environ["wsgi.input"].read(size))
                with lock:
                    armed.append(spec)
                return reply(start_response, "200 OK", b"{}")
            return reply(start_response, "404 Not Found", b"{}")
        trigger = None
        with lock:
            log.append(
                [
                    method,
                    path,
                    environ.get("QUERY_STRING", ""),
                    environ.get("HTTP_IF_NONE_MATCH", ""),
                    environ.get("HTTP_IF_MATCH", ""),
                ]
            )
            for spec in armed:
                if spec["method"] == method and re.search(spec["pattern"], path):
                    trigger = spec
                    armed.remove(spec)
                    break
        if trigger is not None and trigger["when"] == "lose-answer":
            # Apply the request, then answer 500 as if the answer had been lost on the way.
            def swallow(status: str, headers: Any, exc_info: Any = None) -> Any:
                return lambda data: None

            for _chunk in app(environ, swallow):
                pass
            return reply(start_response, "500 Internal Server Error", b"{}")
        if trigger is not None and trigger["when"] == "delay":
            time.sleep(float(trigger["seconds"]))
            return app(environ, start_response)
        if trigger is not None and trigger["when"] == "deny":
            body = b"<Error><Code>AccessDenied</Code><Message>injected</Message></Error>"
            start_response("403 Forbidden", [("Content-Type", "application/xml")])
            return [body]
        if trigger is not None and trigger["when"] == "before":
            os.kill(trigger["pid"], signal.SIGKILL)
            return reply(start_response, "500 Internal Server Error", b"{}")
        if trigger is not None:
            # Apply the request fully (moto stores the object while handling it), then kill
            # the client before it can read the answer.
            body = list(app(environ, start_response))
            os.kill(trigger["pid"], signal.SIGKILL)
            return body
        return app(environ, start_response)

    server = make_server("127.0.0.1", 0, wrapped, True, request_handler=MotoRequestHandler)
    print(server.server_address[1], flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server.serve_forever()


if __name__ == "__main__":
    main()
