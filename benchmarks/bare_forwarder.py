"""The floor for any proxy in its own process: forward lines both ways, nothing else.

Used by proxy_overhead.py to separate the proxy's costs: the extra process hop alone (no flag),
and the hop plus reading each message as JSON and writing it back (`--parse`), the least a proxy
that enforces rules on message contents must do.

    python benchmarks/bare_forwarder.py [--parse] SERVER_COMMAND ARG...
"""

import json
import subprocess
import sys
import threading

parse = sys.argv[1] == "--parse"
child = subprocess.Popen(sys.argv[2 if parse else 1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)


def relay(line: bytes) -> bytes:
    return json.dumps(json.loads(line)).encode() + b"\n" if parse else line


def to_child() -> None:
    for line in sys.stdin.buffer:
        child.stdin.write(relay(line))
        child.stdin.flush()
    child.stdin.close()


threading.Thread(target=to_child, daemon=True).start()
for line in child.stdout:
    sys.stdout.buffer.write(relay(line))
    sys.stdout.buffer.flush()
