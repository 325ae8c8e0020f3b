"""Schemathesis hooks for scripts/schemathesis.sh.

Negative data generation puts control characters into header values (for example in
`x-service-account`). Such a request is not valid HTTP (RFC 9110 field values exclude CTLs):
the HTTP layer (hyper) refuses it with a bare `400` before any API code runs, as any real
server or proxy would. Those cases test the HTTP library, not the emulator, so they are not
generated.

The run against the published document uses the check `status_code_published_or_emulator_error`
(below) in place of `status_code_conformance`.
"""

import json
import os

import schemathesis


def _is_field_value(value):
    return all(ch == "\t" or (" " <= ch and ch != "\x7f") for ch in str(value))


@schemathesis.hook
def filter_headers(context, headers):
    return headers is None or all(_is_field_value(v) for v in headers.values())


# The run against the service's published document (`scripts/schemathesis.sh --published`).
# That document leaves out error statuses the service answers anyway (a 400 for a body that
# fails validation on most operations, a 404 for an unknown snippet). Such a status passes
# when the emulator's own document declares it for the operation, and the body is the error
# shape with the same status; any other status the published document does not list fails.
_EMULATOR_ERROR_STATUSES = {400, 404, 415}
_emulator_document = None


def _emulator_responses(case):
    global _emulator_document
    if _emulator_document is None:
        with open(os.environ["SCHEMATHESIS_EMULATOR_OPENAPI"], encoding="utf-8") as f:
            _emulator_document = json.load(f)
    operation = _emulator_document["paths"].get(case.operation.path, {})
    return operation.get(case.method.lower(), {}).get("responses", {})


@schemathesis.check
def status_code_published_or_emulator_error(ctx, response, case):
    published = case.operation.definition.raw.get("responses", {})
    status = response.status_code
    if str(status) in published or "default" in published:
        return None
    emulator = _emulator_responses(case)
    where = f"{case.method} {case.operation.path}"
    if status not in _EMULATOR_ERROR_STATUSES or str(status) not in emulator:
        raise AssertionError(
            f"{where}: status {status} is in neither the published document "
            f"({', '.join(published)}) nor the emulator's error statuses ({', '.join(emulator)})"
        )
    try:
        body = response.json()
    except ValueError:
        body = None
    if not (
        isinstance(body, dict)
        and body.get("statusCode") == status
        and isinstance(body.get("error"), str)
        and isinstance(body.get("message"), str)
    ):
        raise AssertionError(f"{where}: status {status} without the error body: {response.text[:200]!r}")
    return None
