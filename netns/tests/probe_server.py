#!/usr/bin/python3
"""An HTTP server for the on-demand probe scenario: answers every GET with the status code written in
STATUS-FILE (200 when the file says 200, else that code), and logs "CLIENT-ADDRESS PATH CODE" per request
to standard output, flushed. Prints "ready" once it listens.

  probe_server.py ADDRESS PORT STATUS-FILE
"""
import http.server
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(sys.argv[3]) as f:
            code = int(f.read().strip() or "500")
        body = b"probe\n"
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        print("%s %s %d" % (self.client_address[0], self.path, code), flush=True)

    def log_message(self, *args):
        pass


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    server = http.server.HTTPServer((sys.argv[1], int(sys.argv[2])), Handler)
    print("ready", flush=True)
    server.serve_forever()


main()
