"""Schemathesis hooks for scripts/schemathesis.sh.

Negative data generation puts control characters into header values (for example in
`x-service-account`). Such a request is not valid HTTP (RFC 9110 field values exclude CTLs):
the HTTP layer (hyper) refuses it with a bare `400` before any API code runs, as any real
server or proxy would. Those cases test the HTTP library, not the emulator, so they are not
generated.
"""

import schemathesis


def _is_field_value(value):
    return all(ch == "\t" or (" " <= ch and ch != "\x7f") for ch in str(value))


@schemathesis.hook
def filter_headers(context, headers):
    return headers is None or all(_is_field_value(v) for v in headers.values())
