"""An HTTP request on the binary protocol port gets an HTTP answer that says which port is which.

A browser, curl or an admin client pointed at 6650 instead of 8080 would otherwise see the
connection dropped ("empty reply"). The first bytes of an HTTP request, read as a Pulsar frame
size, are far above any frame limit, so this is only consulted when that first frame fails.
"""

from __future__ import annotations

_METHODS = (b"GET ", b"POST", b"PUT ", b"HEAD", b"DELE", b"OPTI", b"PATC", b"CONN")


def http_reply(first_bytes: bytes, service_url: str, web_url: str) -> bytes | None:
    """A ``400 Bad Request`` response for an HTTP request, else None."""
    if not first_bytes.startswith(_METHODS):
        return None
    body = (f"this is quire's Pulsar binary protocol port ({service_url}); the admin REST API and "
            f"/metrics are on {web_url}\n").encode()
    head = (f"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    return head + body
